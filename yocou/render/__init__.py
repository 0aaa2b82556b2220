"""One module per rendered table or figure, fed only by result files (showyourwork style).

Each module has ``main(argv)`` and runs as ``python -m yocou.render.<name>``.
"""
