# The mechanism probe (yocou.evaluation.probe): multi-query associative recall and k-hop pointer chasing (k = 1..4) with every
# query farther from its context than the self-decoder reaches; Transformer, YOCO, YOCO-U at T = 1, 2, 3, RINS and
# YOCO trained for YOCO-U's FLOPs, PROBE_SEEDS seeds each. Target `probe`: results/<scale>/probe/ and
# figures/<scale>/probe.* (accuracy against hops, 95% intervals across seeds, chance levels). The probe's own
# settings are named by scale in yocou.evaluation.probe.run.SCALES (smoke for the tests' scale, tiny otherwise).
# PROBE_MODELS, PROBE_SEEDS and PROBE_SCALE are in common.smk.


PROBE_OUT = [f"{RES}/probe/probe{x}" for x in ("_tidy.csv", "_summary.csv", "_table.md", ".png", ".pdf")]


if not uncommitted(PROBE_OUT, "probe"):

    rule probe:
        input:
            PROBE_OUT,  # rule probe_summarize (compute/probe.smk)

else:

    rule probe:
        localrule: True
        log:
            f"logs/{SCALE}/probe.log",
        conda: CONDA_ENV
        params:
            text=uncommitted(PROBE_OUT, "probe"),
        shell:
            "echo {params.text:q} | tee {log} >&2; exit 1"
