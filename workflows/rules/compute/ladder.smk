# The compute rules of ladder.smk (defined only when computing: yocou.workflow.committed, common.smk).


rule ladder_tokens:
    # The ladder's token streams: the scale's training stream without the held-out plays (heldout_plays of
    # workflows/studies/ladder.yaml), the plays, and the scale's book and code splits.
    input:
        expand(f"{RUN}/tokens/{{split}}.bin", split=["train", "heldout_book", "heldout_code"]),  # with their json, offsets
    output:
        expand(f"{LTOK}/{{split}}{{ext}}", split=["train", *LADDER_SPLITS], ext=[".bin", ".offsets.npy", ".json"]),
    log:
        f"logs/{SCALE}/ladder/tokens.log",
    benchmark:
        bench("ladder_tokens")
    params:
        scale=SCALE,
        tokens=lambda w, input: os.path.dirname(input[0]),  # the scale's token folder
        out=lambda w, output: os.path.dirname(output[0]),  # the ladder's
        # what the split reads from the study file: editing anything else in it (another scale, a comment) must not
        # retrain the ladder
        study=LADDER_STUDY,
        plays=json.dumps(LADDER.heldout_plays.model_dump(), sort_keys=True) if LADDER else "",
    conda: CONDA_ENV
    shell:
        "python -m yocou.training.ladder split-tokens --scale {params.scale} --study {params.study} "
        "--tokens {params.tokens} --out {params.out} > {log} 2>&1"


rule ladder_run_config:
    input:
        tok=f"{RUN}/tokenizer.json",
        bracket=ladder_bracket_input,
    output:
        f"{LRUN}/{{lrun}}/run_config.json",
    wildcard_constraints:
        lrun=_LADDER_RE,
    log:
        f"logs/{SCALE}/ladder/run_config_{{lrun}}.log",
    benchmark:
        bench("ladder_run_config", "lrun")
    params:
        scale=SCALE,
        cfg=lambda w: ladder_config_json(LADDER_RUNS[w.lrun].variant),
        plan=ladder_run_plan,  # the study file's part of the run config
        bracket=lambda w, input: f"--bracket {input.bracket[0]}" if input.bracket else "",
    conda: CONDA_ENV
    shell:
        "python -m yocou.training.ladder run-config --config {params.cfg} --scale {params.scale} --run {wildcards.lrun} "
        "--tokenizer {input.tok} {params.bracket} --out {output} > {log} 2>&1"


rule ladder_rates:
    # Each variant's best bracketed rate, the file the ladder's run configs read: from the bracket runs' held-out
    # losses only (no code file among the inputs: editing the summaries must not retrain the ladder).
    input:
        ppl=lambda w: [f"{LRES}/ppl/{n}.json" for n in ladder_names("bracket")],
    output:
        f"{LRUN}/rates.json",
    log:
        f"logs/{SCALE}/ladder/rates.log",
    benchmark:
        bench("ladder_rates")
    params:
        scale=SCALE,
        ppl_root=lambda w, input: os.path.dirname(input.ppl[0]),
    conda: CONDA_ENV
    shell:
        "python -m yocou.results.summarize.ladder rates --scale {params.scale} --ppl-root {params.ppl_root} "
        "--out {output} > {log} 2>&1"


rule depth_rates:
    # The depth control's best bracketed rate (depth_control of workflows/studies/ladder.yaml), from its own bracket
    # runs' held-out losses only, as rule ladder_rates.
    input:
        ppl=lambda w: [f"{LRES}/ppl/{n}.json" for n in ladder_names("depth_bracket")],
    output:
        f"{LRUN}/depth_rates.json",
    log:
        f"logs/{SCALE}/ladder/depth_rates.log",
    benchmark:
        bench("depth_rates")
    params:
        scale=SCALE,
        ppl_root=lambda w, input: os.path.dirname(input.ppl[0]),
    conda: CONDA_ENV
    shell:
        "python -m yocou.results.summarize.ladder rates --kind depth_bracket --scale {params.scale} "
        "--ppl-root {params.ppl_root} --out {output} > {log} 2>&1"


_LADDER_TRAIN = ("python -m yocou.utils.runlock {params.out} && OMP_NUM_THREADS={threads} {params.launch} train "
                 "--run-config {input.rc} --data {input.data} --out {params.out} {params.init} {params.state} "
                 "> {log} 2>&1")


rule ladder_train_stable:
    # A stable segment: warmup then the peak rate, from the previous segment's state; keeps its own state.pt.
    input:
        rc=f"{LRUN}/{{lrun}}/run_config.json",
        data=f"{LTOK}/train.bin",
        parent=ladder_parent_state,
    output:
        model=f"{LRUN}/{{lrun}}/model.pt",
        metrics=f"{LRUN}/{{lrun}}/metrics.jsonl",
        summary=f"{LRUN}/{{lrun}}/summary.json",
        state=f"{LRUN}/{{lrun}}/state.pt",
    wildcard_constraints:
        lrun=_STABLE_RE,
    log:
        f"logs/{SCALE}/ladder/train_{{lrun}}.log",
    benchmark:
        bench("ladder_train", "lrun")
    params:
        launch=launcher,
        out=lambda w, output: os.path.dirname(output.model),
        init=lambda w, input: f"--init-from {input.parent[0]}" if input.parent else "",
        state="--save-state",
    threads: job_threads("ladder_train_stable", "train")
    priority: 1  # segments first: every branch and later segment waits on them
    conda: CONDA_ENV
    shell:
        _LADDER_TRAIN


rule ladder_train:
    # A bracket run (from step 0) or a cooldown branch (from its stable segment's state).
    input:
        rc=f"{LRUN}/{{lrun}}/run_config.json",
        data=f"{LTOK}/train.bin",
        parent=ladder_parent_state,
    output:
        model=f"{LRUN}/{{lrun}}/model.pt",
        metrics=f"{LRUN}/{{lrun}}/metrics.jsonl",
        summary=f"{LRUN}/{{lrun}}/summary.json",
    wildcard_constraints:
        lrun=_OTHER_RE,
    log:
        f"logs/{SCALE}/ladder/train_{{lrun}}.log",
    benchmark:
        bench("ladder_train", "lrun")
    params:
        launch=launcher,
        out=lambda w, output: os.path.dirname(output.model),
        init=lambda w, input: f"--init-from {input.parent[0]}" if input.parent else "",
        state="",
    threads: job_threads("ladder_train", "train")
    conda: CONDA_ENV
    shell:
        _LADDER_TRAIN


rule ladder_ppl:
    # The held-out loss of a bracket run or an annealed model: rule ppl's evaluation (eval.ppl settings).
    input:
        model=f"{LRUN}/{{lrun}}/model.pt",
        data=expand(f"{LTOK}/{{split}}.bin", split=LADDER_SPLITS),
        tok=f"{RUN}/tokenizer.json",
    output:
        f"{LRES}/ppl/{{lrun}}.json",
    wildcard_constraints:
        lrun=_OTHER_RE,
    log:
        f"logs/{SCALE}/ladder/ppl_{{lrun}}.log",
    benchmark:
        bench("ladder_ppl", "lrun")
    params:
        p=config["eval"]["ppl"],
        tokens=lambda w, input: os.path.dirname(input.data[0]),  # the folder of input.data
        max_tokens=lambda w: (f"--max-tokens {config['eval']['ppl']['max_tokens']}"
                              if config["eval"]["ppl"]["max_tokens"] else ""),
        splits=" ".join(LADDER_SPLITS),
        device=job_device,
    threads: job_threads("ladder_ppl", "eval")
    conda: CONDA_ENV
    shell:
        "OMP_NUM_THREADS={threads} python -m yocou.cli ppl --model {input.model} --data {params.tokens} "
        "--seq-len {params.p[seq_len]} {params.max_tokens} --tokenizer {input.tok} --dtype {params.p[dtype]} "
        "--batch {params.p[batch]} --splits {params.splits} --device {params.device} --out {output} > {log} 2>&1"


rule ladder_baselines:
    # The Kneser-Ney bigram fitted on the training windows of one budget (base seed), scored like rule ppl: the
    # trivial baseline each annealed point is gated against (eval/ladder.yaml).
    input:
        train=f"{LTOK}/train.bin",
        data=expand(f"{LTOK}/{{split}}.bin", split=LADDER_SPLITS),
        tok=f"{RUN}/tokenizer.json",
    output:
        f"{LRES}/baselines/d{{budget}}.json",
    wildcard_constraints:
        budget=r"\d+",
    log:
        f"logs/{SCALE}/ladder/baselines_d{{budget}}.log",
    benchmark:
        bench("ladder_baselines", "budget")
    params:
        seq_len=config["eval"]["ppl"]["seq_len"],
        tokens=lambda w, input: os.path.dirname(input.data[0]),  # the folder of input.data
        max_tokens=lambda w: (f"--max-tokens {config['eval']['ppl']['max_tokens']}"
                              if config["eval"]["ppl"]["max_tokens"] else ""),
        budget=lambda w: (f"--budget-steps {w.budget} --budget-batch {config['train']['batch_size']} "
                          f"--budget-seq-len {config['train']['seq_len']} --budget-seed {config['seed']}"),
        splits=" ".join(LADDER_SPLITS),
    conda: CONDA_ENV
    shell:
        "python -m yocou.cli baselines --train {input.train} --data {params.tokens} --seq-len {params.seq_len} "
        "{params.max_tokens} --tokenizer {input.tok} {params.budget} --splits {params.splits} --out {output} > {log} 2>&1"


rule ladder_points:
    # One row per annealed model: held-out losses, its own-budget bigram, train loss, epochs, tokens per parameter.
    input:
        summaries=lambda w: [f"{LRUN}/{n}/summary.json" for n in ladder_names("anneal")],
        metrics=lambda w: [f"{LRUN}/{n}/metrics.jsonl" for n in ladder_names("anneal")],
        data=f"{LTOK}/train.bin",
        ppl=lambda w: [f"{LRES}/ppl/{n}.json" for n in ladder_names("anneal")],
        baselines=lambda w: [f"{LRES}/baselines/d{d}.json" for d in LADDER.budgets],
        bracket=f"{LRES}/bracket.json",  # every run at its variant's best rate (checked; a rewrite re-reads the points)
    output:
        csv=f"{LRES}/points.csv",
        json=f"{LRES}/points.json",
    log:
        f"logs/{SCALE}/ladder/points.log",
    benchmark:
        bench("ladder_points")
    params:
        scale=SCALE,
        run_root=lambda w, input: os.path.dirname(os.path.dirname(input.summaries[0])),
        res=lambda w, output: os.path.dirname(output.csv),
    conda: CONDA_ENV
    shell:
        "python -m yocou.results.summarize.ladder points --scale {params.scale} --run-root {params.run_root} --res {params.res} "
        "--data {input.data} --bracket {input.bracket} --out {output.csv} > {log} 2>&1"


rule depth_points:
    # One row per annealed model of the depth control (depth_control of workflows/studies/ladder.yaml), as
    # ladder_points' rows.
    input:
        summaries=lambda w: [f"{LRUN}/{n}/summary.json" for n in ladder_names("depth")],
        metrics=lambda w: [f"{LRUN}/{n}/metrics.jsonl" for n in ladder_names("depth")],
        data=f"{LTOK}/train.bin",
        ppl=lambda w: [f"{LRES}/ppl/{n}.json" for n in ladder_names("depth")],
        baselines=lambda w: [f"{LRES}/baselines/d{d}.json" for d in LADDER.depth_control.budgets],
    output:
        csv=f"{LRES}/depth_points.csv",
        json=f"{LRES}/depth_points.json",
    log:
        f"logs/{SCALE}/ladder/depth_points.log",
    benchmark:
        bench("depth_points")
    params:
        scale=SCALE,
        run_root=lambda w, input: os.path.dirname(os.path.dirname(input.summaries[0])),
        res=lambda w, output: os.path.dirname(output.csv),
    conda: CONDA_ENV
    shell:
        "python -m yocou.results.summarize.ladder points --kind depth --scale {params.scale} --run-root {params.run_root} "
        "--res {params.res} --data {input.data} --out {output.csv} > {log} 2>&1"


from yocou.model.config import SIZES as _MODEL_SIZES  # noqa: E402


rule ladder_context:
    # Context use beyond the window of one annealed model (yocou.evaluation.analysis.context_use): loss against
    # position and with the context farther than W shuffled, on rule ppl's held-out windows.
    input:
        model=f"{LRUN}/{{lrun}}/model.pt",
        data=expand(f"{LTOK}/{{split}}.bin", split=["heldout_book", "heldout_code"]),
    output:
        f"{LRES}/context/{{lrun}}.json",
    wildcard_constraints:
        lrun=_OTHER_RE,
    log:
        f"logs/{SCALE}/ladder/context_{{lrun}}.log",
    benchmark:
        bench("ladder_context", "lrun")
    params:
        seq_len=config["eval"]["ppl"]["seq_len"],
        # W of the scale's model size (its config's sizes, else yocou.model.config.SIZES): the span kept intact
        window=lambda w: ({**_MODEL_SIZES, **(config.get("sizes") or {})}[config["model"]["size"]])["window"],
        max_tokens=lambda w: (f"--max-tokens {config['eval']['ppl']['max_tokens']}"
                              if config["eval"]["ppl"]["max_tokens"] else ""),
        tokens=lambda w, input: os.path.dirname(input.data[0]),
    threads: job_threads("ladder_context", "eval")
    conda: CONDA_ENV
    shell:
        "OMP_NUM_THREADS={threads} python -m yocou.evaluation.analysis.context_use measure --model {input.model} "
        "--data {params.tokens} --splits heldout_book heldout_code --seq-len {params.seq_len} --window {params.window} "
        "{params.max_tokens} --out {output} > {log} 2>&1"


rule ladder_weights:
    # An annealed model's weights as a committed .safetensors file (yocou.training.weights: its config and the
    # tensors' digest in the metadata), so a new evaluation of it needs no retraining.
    input:
        f"{LRUN}/{{lrun}}/model.pt",
    output:
        f"{LRES}/weights/{{lrun}}.safetensors",
    wildcard_constraints:
        lrun=_OTHER_RE,
    log:
        f"logs/{SCALE}/ladder/weights_{{lrun}}.log",
    conda: CONDA_ENV
    shell:
        "python -m yocou.training.weights --model {input} --out {output} > {log} 2>&1"


rule ladder_checks_summary:
    # The ladder's checks (checks: of workflows/studies/ladder.yaml: the horizon bracket, cross_rope) beside the
    # ladder's own seed-0 annealed points, judged by eval/ladder.yaml (checks). Target ladder_checks; not in ladder.
    input:
        ppl=lambda w: [f"{LRES}/ppl/{n}.json" for n in ladder_names("check")],
        points=f"{LRES}/points.csv",
        rules=str(_eval_dir() / "ladder.yaml"),
        code=[f"{PKG}/results/summarize/ladder.py"],
    output:
        csv=f"{LRES}/checks.csv",
        md=f"{LRES}/checks.md",
        json=f"{LRES}/checks.json",
    log:
        f"logs/{SCALE}/ladder/checks.log",
    params:
        scale=SCALE,
        ppl_root=f"{LRES}/ppl",
    conda: CONDA_ENV
    shell:
        "python -m yocou.results.summarize.ladder checks --scale {params.scale} --ppl-root {params.ppl_root} "
        "--points {input.points} --rules {input.rules} --out {output.csv} > {log} 2>&1"
