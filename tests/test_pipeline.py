"""``jtcse pipeline``: stages run in order, per-stage settings reach the trainers, the ensemble stage and the
distillation into the starting model, finished stages skipped on rerun by one rule whoever ran them (refused when
their settings changed, never kept stale), one summary table with the starting model as the row to beat."""

from __future__ import annotations

import json

import pytest

from jtcse.defaults import default_corpus_sentences
from jtcse.errors import JTCSEError
from jtcse.pipeline.run import run_pipeline
from jtcse.pipeline.settings import PipelineConfig

TINY = {"batch_size": 16, "max_steps": 2, "learning_rate": 1e-3}


def config(**values) -> PipelineConfig:
    """A pipeline config from the values a recipe holds (``twin={"max_steps": 2}`` for a table)."""
    return PipelineConfig.from_values(values)


@pytest.fixture()
def corpus_file(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(default_corpus_sentences(limit=48)) + "\n", encoding="utf-8")
    return path


@pytest.mark.slow
def test_a_stage_is_done_by_one_rule_whoever_ran_it(tiny_bert, tiny_bert_b, corpus_file, tmp_path):
    """A warm-up run by hand with the settings the pipeline would use is done (skipped); the pipeline's own runs
    are skipped on rerun; a stage folder holding a run of other settings is refused, naming what differs, old and
    new, whether or not the pipeline wrote it."""
    from jtcse.training.settings import WarmupSettings
    from jtcse.training.simcse import train_simcse

    out = tmp_path / "recipe"
    by_hand = train_simcse(tiny_bert, corpus_file, out / "tower_a", **TINY, seed=42)  # as `jtcse simcse -o` would
    settings = config(tower_a=tiny_bert, tower_b=tiny_bert_b, corpus=str(corpus_file), until="warmup", warmup=TINY)
    first = run_pipeline(out, settings)
    assert [(row["stage"], row["status"]) for row in first["table"]] == [
        ("warmup_a", "skipped (done)"), ("warmup_b", "ran")
    ]  # fmt: skip
    assert first["stages"]["warmup_a"] == json.loads(json.dumps(by_hand, default=str))  # as the folder holds it
    assert first["stages"]["warmup_b"]["config"]["seed"] == 43  # the second tower gets another seed
    assert WarmupSettings().training.seed == 42
    weights = out / "tower_b" / "model.safetensors"
    stamp = weights.stat().st_mtime_ns

    second = run_pipeline(out, settings)
    assert [row["status"] for row in second["table"]] == ["skipped (done)", "skipped (done)"]
    assert weights.stat().st_mtime_ns == stamp
    assert "| warmup_a | skipped (done) |" in (out / "pipeline_summary.md").read_text(encoding="utf-8")
    assert json.loads((out / "pipeline_summary.json").read_text())["until"] == "warmup"

    other_start = config(**{**settings.values(), "tower_a": tiny_bert_b})  # the model tower I starts from changed
    with pytest.raises(JTCSEError, match=r"tower_a already holds a finished run, from inputs that have changed since "
                                         r"\(model \"sha256:\w+\" -> \"sha256:\w+\"\)"):  # fmt: skip
        run_pipeline(out, other_start)
    assert weights.stat().st_mtime_ns == stamp


def test_bad_pipeline_settings_are_clear_errors(tmp_path, tiny_bert):
    cases = [
        (dict(until="everything"), r"until: Input should be 'warmup', 'probe', 'twin', 'ensemble', 'distill' or 'eval'$"),
        (dict(until="ensemble", ensemble={"enabled": False}, twin={"enabled": True}),
         r"^--until ensemble: this run has no ensemble: it needs --ensemble-with or a sentence-transformers start"),
        (dict(until="twin", ensemble={"with": ["m"], "weights": [1]}), r"1 weight\(s\) given for 2 ensemble members"),
        (dict(until="twin", ensemble={"with": ["m"], "combine": "max"}), r"combine: Input should be 'concat' or 'sum'$"),
        (dict(until="twin", ensemble={"enabled": False, "weights": [1, 1]}, twin={"enabled": True}),
         r"ensemble weights were given without models"),
        (dict(until="twin", ensemble={"enabled": False, "with": ["m"]}), r"enabled = false \(--no-ensemble\) and models"),
        (dict(until="twin", pooling="max"), r"pooling: Input should be 'cls' or 'mean'$"),
        ({}, r"the eval stage reports on a dev file: give --dev-file"),
        (dict(dev_file=str(tmp_path / "missing.csv")), r"dev file not found"),
        (dict(until="twin", twin={"enabled": True, "checkpoint": "best-dev"}),
         r"^\[twin\] checkpoint best-dev keeps the checkpoint with the best dev Spearman, so it needs a dev file "
         r"\(dev_file\); or keep the last step \(\[twin\] checkpoint last\)\.$"),
        (dict(until="twin", twin={"enabled": True}, probe={"enabled": True}),
         r"the probe scores its twins on selection files"),
    ]  # fmt: skip
    for values, message in cases:  # JTCSEError, or the Ensemble's own ValueError of its weights
        with pytest.raises(ValueError, match=message):
            run_pipeline(tmp_path / "out", config(**values))
    assert not (tmp_path / "out").exists()


def test_until_names_the_values_of_this_run_and_why_a_stage_is_off(tmp_path, tiny_bert):
    """With the twin turned off, --until twin says so and how, and lists only what this run can stop after."""
    with pytest.raises(JTCSEError) as refused:
        run_pipeline(tmp_path / "out", config(tower_a=tiny_bert, until="twin", twin={"enabled": False}))
    assert str(refused.value) == (
        "--until twin: the twin is off for this run (--no-twin, [twin] enabled = false); this run stops after one of "
        "warmup, ensemble, distill, eval."
    )
    with pytest.raises(JTCSEError, match="the probe runs with --probe"):
        run_pipeline(tmp_path / "out", config(tower_a=tiny_bert, until="probe", twin={"enabled": True}))


@pytest.mark.slow
def test_full_pipeline_runs_and_reruns_as_skips_and_never_keeps_a_stale_model(
    tiny_bert, tiny_bert_b, corpus_file, tmp_path, shared_data, capfd
):
    import warnings

    dev = tmp_path / "dev.csv"
    lines = (shared_data / "stsbenchmark" / "sts-dev.csv").read_text(encoding="utf-8").splitlines()[:40]
    dev.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tiny = {"batch_size": 16, "max_steps": 2, "eval_steps": 2}
    values = dict(tower_a=tiny_bert, tower_b=tiny_bert_b, corpus=str(corpus_file), dev_file=str(dev),
                  ensemble={"enabled": False}, warmup=tiny, twin=tiny, distill=tiny)  # fmt: skip
    said: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = run_pipeline(tmp_path / "recipe", config(**values), say=said.append)
    assert not [w for w in caught if "checkpointing" in str(w.message)]  # the project passes the current name
    assert "Computing widget examples" not in capfd.readouterr().err  # no widget sampled for a card it rewrites
    assert_stage_lines(said, ["warmup_a", "warmup_b", "twin", "distill", "eval"], folders=tmp_path / "recipe")
    assert [(row["stage"], row["status"]) for row in first["table"]] == [
        ("start", "starting model (its own pooling)"), ("start_b", "starting model (its own pooling)"),
        ("warmup_a", "ran"), ("warmup_b", "ran"), ("twin", "ran"), ("distill", "ran"), ("eval", "ran"),
    ]  # fmt: skip
    scores = first["stages"]["eval"]["dev_spearman"]
    assert set(scores) == {"start", "start_b", "warmup_a", "warmup_b", "twin", "distill"}
    distilled = first["stages"]["distill"]
    assert distilled["model"]["student"] == tiny_bert and distilled["model"]["teacher"].endswith("twin")
    trained = [first["stages"][stage] for stage in ("warmup_a", "warmup_b", "twin", "distill")]
    assert len({frozenset(summary) for summary in trained}) == 1  # one summary schema for every stage
    assert [summary["stage"] for summary in trained] == ["simcse", "simcse", "twin", "distill"]
    assert first["config"] == config(**values).values()  # the whole config, as a recipe would hold it
    said.clear()
    second = run_pipeline(tmp_path / "recipe", config(**values), say=said.append)
    assert [row["status"] for row in second["table"][2:]] == ["skipped (done)"] * 5
    assert said[1::2] == [f"[{i}/5] {stage}: done before, skipped" for i, stage in enumerate(
        ["warmup_a", "warmup_b", "twin", "distill", "eval"], start=1)]  # fmt: skip
    assert second["stages"]["eval"]["dev_spearman"] == scores
    took = {row["stage"]: row["stage_seconds"] for row in second["table"][2:6]}  # each trainer's, as its run had it
    assert took == {row["stage"]: row["stage_seconds"] for row in first["table"][2:6]} and all(took.values())
    assert all(row["seconds"] == 0.0 for row in second["table"][2:])  # while this run spent none on them
    with pytest.raises(JTCSEError, match=r"twin already holds a finished run, with other settings \(\[twin\] "
                                         r"learning_rate 1e-05 -> 0.0001\)"):  # fmt: skip
        run_pipeline(tmp_path / "recipe", config(**{**values, "twin": {**tiny, "learning_rate": 1e-4}}))
    # warm-up I trained again (its folder removed) to other weights: the twin trained on the old tower I is not
    # kept. The same settings would train the same bytes, and a tower compared by content would rightly be kept.
    import shutil

    shutil.rmtree(tmp_path / "recipe" / "tower_a")
    retrained = {**values, "warmup": {**tiny, "learning_rate": 1e-3}, "warmup_b": {"learning_rate": 3e-5}}
    with pytest.raises(JTCSEError, match=r"twin already holds a finished run, from inputs that have changed since "
                                         r"\(towers "):  # fmt: skip
        run_pipeline(tmp_path / "recipe", config(**retrained))


def assert_stage_lines(said: list[str], stages: list[str], folders) -> None:
    """What a run says: for each stage a line as it starts (``[i/N] name → folder``, a training stage's steps and
    batch); for a training stage a line once its first steps are timed (its length at this machine's measured
    speed, and the training the run has left); and a line as it ends, with its time and dev score."""
    import re

    count, at = len(stages), 0
    for i, stage in enumerate(stages, start=1):
        tag = re.escape(f"[{i}/{count}] {stage}")
        assert re.match(rf"^{tag} → {re.escape(str(folders))}/\w+( \(2 steps of 16\))?", said[at]), said[at]
        at += 1
        if said[at].startswith(f"[{i}/{count}] {stage}:"):  # a training stage timed its first step
            assert re.match(rf"^{tag}: 2 steps of 16; ~\d+ s at this machine's measured speed \(\d+\.\d\d s a step "
                            rf"over 1\)(; the run has ~[\w ]+ of training left)?$", said[at]), said[at]  # fmt: skip
            at += 1
        assert re.match(rf"^{tag} done in \d+ (s|min)", said[at]), said[at]
        at += 1
    assert at == len(said)
    assert re.search(r"done in .*; dev Spearman ×100: start -?\d+\.\d\d, .*distill -?\d+\.\d\d$", said[-1])
    assert any(re.search(r"; ~[\w ]+ of training left$", line) for line in said[:-1])  # an estimate of the rest


@pytest.mark.slow
@pytest.mark.cli
def test_cli_stage_options_reach_the_trainers_and_the_ensemble_is_distilled_into_the_start(
    tiny_bert, tiny_bert_b, corpus_file, tmp_path, shared_data
):
    from helpers.cli import invoke_cli

    dev = tmp_path / "dev.csv"
    lines = (shared_data / "stsbenchmark" / "sts-dev.csv").read_text(encoding="utf-8").splitlines()[:40]
    dev.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "recipe"
    args = [
        "pipeline", "-o", out, "--tower-a", tiny_bert, "--tower-b", tiny_bert_b, "--corpus", corpus_file,
        "--dev-file", dev, "--batch-size", 8, "--eval-steps", 2,
        "--warmup-max-steps", 2, "--warmup-learning-rate", 1e-3, "--warmup-max-seq-length", 12,
        "--warmup-b-positives", "deletion", "--warmup-b-learning-rate", 2e-3,
        "--twin-max-steps", 3, "--twin-learning-rate", 2e-4, "--twin-batch-size", 4, "--twin-max-seq-length", 16,
        "--twin-cael-every", 0, "--twin-ictm-weight", 0.25, "--twin-icnce-weight", 0.5,
        "--ensemble-with", tiny_bert, "--ensemble-weights", "1,0.5",
        "--distill-max-steps", 2, "--distill-learning-rate", 3e-4, "--distill-batch-size", 6,
        "--distill-objective", "cosine",
    ]  # fmt: skip
    result = invoke_cli(*args)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((out / "pipeline_summary.json").read_text())
    stages = summary["stages"]
    assert [row["stage"] for row in summary["table"]] == [
        "start", "start_b", "warmup_a", "warmup_b", "twin", "ensemble", "distill", "eval"
    ]  # fmt: skip
    warm = stages["warmup_b"]["settings"]  # [warmup]'s but for what [warmup_b] says
    assert (warm["max_steps"], warm["learning_rate"], warm["max_seq_length"], warm["batch_size"]) == (2, 2e-3, 12, 8)
    assert (
        stages["warmup_b"]["data"]["positives"] == "deletion" and stages["warmup_a"]["data"]["positives"] == "dropout"
    )
    assert stages["warmup_a"]["settings"]["learning_rate"] == 1e-3
    twin = stages["twin"]
    assert (twin["steps"], twin["settings"]["learning_rate"], twin["settings"]["batch_size"]) == (3, 2e-4, 4)
    assert twin["settings"]["max_seq_length"] == 16 and twin["model"]["cael_every"] is None
    assert twin["config"]["loss_weights"] == [1.0, 0.5, 0.25]
    ens = json.loads((out / "ensemble" / "ensemble_config.json").read_text())
    assert ens["weights"] == [1.0, 0.5] and stages["ensemble"]["members"] == [str(out / "twin"), tiny_bert]
    distilled = stages["distill"]
    assert distilled["model"]["teacher"] == str(out / "ensemble") and distilled["model"]["student"] == tiny_bert
    assert (distilled["steps"], distilled["settings"]["learning_rate"], distilled["settings"]["batch_size"]) == (
        2,
        3e-4,
        6,
    )
    assert distilled["model"]["objective"] == "cosine" and distilled["model"]["teacher_dimension"] == 64
    assert distilled["model"]["student_dimension"] == 32  # the width it started with; the projection is not saved
    # the ensemble stage saves as `jtcse ensemble` does: its card, and nothing left beside the folder
    assert "\n# jtcse ensemble\n" in (out / "ensemble" / "README.md").read_text(encoding="utf-8")
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("ensemble")) == ["ensemble"]
    card = (out / "distilled" / "README.md").read_text(encoding="utf-8")  # states and cites the objective used
    assert "with the `cosine` objective" in card and "#### EmbedDistillLoss (objective `cosine`)" in card
    assert "(MSE)" not in card

    table = (out / "pipeline_summary.md").read_text()
    start = summary["stages"]["eval"]["dev_spearman"]["start"]
    assert f"| start | starting model (its own pooling) | 0.0 | {100 * start:.2f} | – | {tiny_bert} |" in table
    ens_score = summary["stages"]["eval"]["dev_spearman"]["ensemble"]
    assert "| ensemble | ran |" in table and f"| {100 * ens_score:.2f} | {100 * (ens_score - start):+.2f} |" in table
    assert "Δ vs start" in result.stdout

    again = invoke_cli(*args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "| twin | skipped (done) |" in again.stdout and "| distill | skipped (done) |" in again.stdout


def test_a_selection_file_that_is_the_dev_file_is_refused_and_shared_pairs_are_left_out(tmp_path, caplog):
    from helpers.sts import DEV_PAIRS, write_stsb

    from jtcse.training.selection import selection_pairs

    dev = write_stsb(tmp_path / "dev.csv")
    with pytest.raises(JTCSEError, match="shares 6 of its 6 sentence pairs with the dev file"):
        run_pipeline(tmp_path / "out", config(until="distill", dev_file=str(dev), selection_files=[str(dev)]))
    selection = tmp_path / "selection.csv"
    a, b, score = DEV_PAIRS[2]
    rows = [(f"Bird {i} sings.", f"A bird number {i} is singing.", 4.5) for i in range(120)] + [
        (b, a, score)
    ]  # swapped
    selection.write_text(
        "".join(f"main-news\tx\t2015\t{i}\t{s}\t{x}\t{y}\n" for i, (x, y, s) in enumerate(rows)), encoding="utf-8"
    )
    kept = selection_pairs(selection, dev)  # 1 of 121: left out, with a warning
    assert len(kept) == 120 and a not in kept.sentences1 + kept.sentences2
    assert "1 of the 121 pairs of the selection file" in caplog.text
    rows[:110] = []  # 1 of 11 shared: more than a few, so the file is refused
    selection.write_text(
        "".join(f"main-news\tx\t2015\t{i}\t{s}\t{x}\t{y}\n" for i, (x, y, s) in enumerate(rows)), encoding="utf-8"
    )
    with pytest.raises(JTCSEError, match="shares 1 of its 11 sentence pairs with the dev file"):
        run_pipeline(tmp_path / "out", config(until="distill", dev_file=str(dev), selection_files=[str(selection)]))
    with pytest.raises(JTCSEError, match="selection file not found: "):
        missing = str(tmp_path / "nope.csv")
        run_pipeline(tmp_path / "out", config(until="distill", dev_file=str(dev), selection_files=[missing]))


def test_the_one_rule_maximises_the_mean_over_the_files_and_keeps_every_file_at_the_start():
    """best_by_total: the best mean among candidates at or above the start on every file; when none is, the one
    whose worst file falls least below it; ties to the first. Hand-computed cases."""
    from jtcse.training.selection import best_by_total, shortfall, total

    start = {"sts": 0.80, "sick": 0.70}
    candidates = {
        0.5: {"sts": 0.81, "sick": 0.70},  # mean 0.755, keeps both
        1.0: {"sts": 0.84, "sick": 0.69},  # mean 0.765, but SICK below the start
        2.0: {"sts": 0.82, "sick": 0.71},  # mean 0.765, keeps both: the choice
        3.0: {"sts": 0.83, "sick": 0.70},  # mean 0.765 too, later: a tie goes to the first
    }
    assert best_by_total(candidates, start) == 2.0
    assert best_by_total(candidates) == 1.0  # without a floor: the best mean (the first of the tie)
    assert total(candidates[2.0]) == pytest.approx(0.765) and shortfall(candidates[1.0], start) == pytest.approx(0.01)
    high = {"sts": 0.90, "sick": 0.90}  # nothing reaches it: the one that falls least below
    assert best_by_total(candidates, high) == 2.0  # worst files 0.20, 0.21, 0.19, 0.20 below
    assert best_by_total({**candidates, 2.0: {"sts": 0.70, "sick": 0.71}}, high) == 3.0  # three 0.20 below: best mean
    with pytest.raises(ValueError, match="no candidates"):
        best_by_total({}, start)


def test_selection_files_repeat_on_the_command_line_and_a_file_given_twice_is_refused(tmp_path):
    from helpers.cli import click_app
    from helpers.sts import write_stsb

    from jtcse.commands.pipeline import pipeline_config
    from jtcse.training.selection import selection_sets

    command = click_app().commands["pipeline"]
    context = command.make_context("pipeline", ["--selection-file", "a.csv", "--selection-file", "b.csv"])
    config, _ = pipeline_config(context.params)
    assert config.selection_files == ("a.csv", "b.csv")
    one = write_stsb(tmp_path / "one.csv")
    with pytest.raises(JTCSEError, match="given twice"):
        selection_sets([str(one), str(tmp_path / "." / "one.csv")], None)
    with pytest.raises(JTCSEError, match=r"selection_files = \["):
        config_from = PipelineConfig.from_values
        config_from({"selection_file": "x.csv"}, where="recipe old.toml")


def test_a_few_incidental_dev_pairs_leave_the_selection_split_with_a_warning(shared_data, caplog):
    """STS-B repeats 11 of its train pairs in dev: STS-B train stays a valid selection file for STS-B dev, without them."""
    from jtcse.evaluation.sts import read_stsb_file
    from jtcse.training.selection import selection_pairs

    train, dev = shared_data / "stsbenchmark" / "sts-train.csv", shared_data / "stsbenchmark" / "sts-dev.csv"
    with caplog.at_level("WARNING"):
        kept = selection_pairs(train, dev)
    assert len(read_stsb_file(train)) - len(kept) == 11
    assert "11 of the 5749 pairs of the selection file" in caplog.text
    dev_pairs = read_stsb_file(dev)
    shared = {frozenset(p) for p in zip(dev_pairs.sentences1, dev_pairs.sentences2, strict=True)}
    assert not any(frozenset(p) in shared for p in zip(kept.sentences1, kept.sentences2, strict=True))
    assert len(kept.genres) == len(kept)


def test_the_default_ensemble_joins_the_start_when_it_is_a_sentence_encoder(tiny_bert, tmp_path):
    from jtcse.pipeline.plan import is_sentence_encoder
    from jtcse.pipeline.settings import ENSEMBLE_WEIGHTS

    assert is_sentence_encoder(None) and is_sentence_encoder(tiny_bert)
    assert not is_sentence_encoder(str(tiny_bert) + ".hf")  # a plain transformers folder (make_tiny_tower's source)
    # by default: the twin and the start; without the twin, warm-up I, warm-up II and the start; weights are checked
    # before anything trains
    with pytest.raises(ValueError, match="1 weight\\(s\\) given for 2 ensemble members"):  # twin + start
        run_pipeline(tmp_path, config(tower_a=tiny_bert, until="ensemble", ensemble={"weights": [1]}))
    with pytest.raises(ValueError, match="1 weight\\(s\\) given for 3 ensemble members"):
        run_pipeline(tmp_path, config(tower_a=tiny_bert, until="ensemble", twin={"enabled": False},
                                      ensemble={"weights": [1]}))  # fmt: skip
    assert len(ENSEMBLE_WEIGHTS.warmups) == 3 and len(ENSEMBLE_WEIGHTS.twin) == 2


def _chosen_by_mean_over_files(scores: dict):
    """The key of ``scores`` (key -> {file: {"all": ...}}) with the best mean over the files (the first of a tie):
    the rule for a teacher, written as a loop."""
    best, best_key = None, None
    for key, files in scores.items():
        mean = sum(files[f]["all"] for f in files) / len(files)
        if best is None or mean > best:
            best, best_key = mean, key
    return best_key


@pytest.mark.slow
def test_default_recipe_weights_from_the_selection_files_and_the_twin_probe(
    tiny_bert, tiny_bert_b, corpus_file, tmp_path, shared_data
):
    from jtcse.training.selection import WEIGHT_GRID

    dev, sts, sick = tmp_path / "dev.csv", tmp_path / "sts.csv", tmp_path / "sick.csv"
    lines = (shared_data / "stsbenchmark" / "sts-dev.csv").read_text(encoding="utf-8").splitlines()
    dev.write_text("\n".join(lines[:30] + lines[700:730] + lines[1200:1230]) + "\n", encoding="utf-8")
    train = (shared_data / "stsbenchmark" / "sts-train.csv").read_text(encoding="utf-8").splitlines()
    sts.write_text("\n".join(train[200:240]) + "\n", encoding="utf-8")  # none of these is a dev pair
    sick_lines = (shared_data / "sick" / "sick-train.csv").read_text(encoding="utf-8").splitlines()
    sick.write_text("\n".join(sick_lines[:40]) + "\n", encoding="utf-8")
    questions = tmp_path / "trec.jsonl"  # a classification set: 60 TREC train questions, scored on half of them
    rows = [json.loads(line) for line in (shared_data / "trec" / "train.jsonl").read_text("utf-8").splitlines()[:60]]
    questions.write_text("".join(json.dumps({**row, "split": "train"}) + "\n" for row in rows), encoding="utf-8")
    specs = [str(sts), str(sick), f"classification:{questions}", f"retrieval-pairs:{sick}"]
    settings = {"batch_size": 8, "max_steps": 2}
    common = dict(tower_a=tiny_bert, tower_b=tiny_bert_b, corpus=str(corpus_file), dev_file=str(dev),
                  selection_files=specs, warmup=settings,
                  twin={"batch_size": 4, "max_steps": 2, "enabled": False}, distill=settings)  # fmt: skip
    result = run_pipeline(tmp_path / "recipe", config(**common))  # without the twin: the warm-ups and the start
    stages, out = result["stages"], tmp_path / "recipe"
    assert [row["stage"] for row in result["table"]] == [
        "start", "start_b", "warmup_a", "warmup_b", "ensemble", "distill", "eval"
    ]  # fmt: skip
    ens = stages["ensemble"]
    assert ens["members"] == [str(out / "tower_a"), str(out / "tower_b"), tiny_bert]
    scores, start = ens["selection_scores"], ens["start_selection_scores"]
    assert list(scores) == [f"{w:g}" for w in WEIGHT_GRID]
    assert all(list(files) == specs for files in scores.values())  # each input reported, an STS file per genre
    assert set(scores["1"][str(sts)]) == {"all", "main-captions"}  # these 40 pairs are captions
    assert set(start[str(sick)]) == {"all", "sick"} and set(start[specs[2]]) == {"all"}
    assert list(start) == specs  # the starting model's scores, for the report
    best = float(_chosen_by_mean_over_files(scores))
    assert ens["weights"] == [best, best, 1.0]  # the start at 1, the warm-ups at the weight the rule chose
    assert stages["distill"]["model"]["teacher"] == str(out / "ensemble")
    genres = stages["eval"]["dev_spearman_by_genre"]
    assert set(genres["start"]) == {"main-captions", "main-news", "main-forums"}
    assert (
        set(genres)
        == set(stages["eval"]["dev_spearman"])
        == {"start", "start_b", "warmup_a", "warmup_b", "ensemble", "distill"}
    )
    assert "| stage | main-captions ×100 (Δ vs start) |" in (out / "pipeline_summary.md").read_text()
    evaluated = stages["eval"]  # every model on every selection input, the mean, and what the student keeps
    assert set(evaluated["selection_scores"]) == set(genres) and list(evaluated["selection_scores"]["start"]) == specs
    assert evaluated["selection_scores"]["ensemble"][str(sts)]["all"] == pytest.approx(
        scores[f"{best:g}"][str(sts)]["all"]
    )
    assert evaluated["selection_inputs"][specs[2]] == {"kind": "classification", "metric": "accuracy"}
    means = {label: sum(s["all"] for s in files.values()) / 4 for label, files in evaluated["selection_scores"].items()}
    assert evaluated["selection_total"] == pytest.approx(means)
    assert set(evaluated["selection_kept"]) == {"ensemble"} and set(
        evaluated["selection_kept"]["ensemble"]["inputs"]
    ) == set(specs)
    table = {row["stage"]: row for row in result["table"]}
    assert table["distill"]["selection_total"] == pytest.approx(means["distill"])
    summary_md = (out / "pipeline_summary.md").read_text()
    assert (
        "| stage | sts.csv ×100 (Δ vs start) | sick.csv ×100 (Δ vs start) | classification:trec.jsonl ×100"
        in summary_md
    )
    assert "| the student keeps, of the gain over the start of |" in summary_md

    # the probe and the twin's towers as members, chosen on two of the inputs: every kind of input was scored above
    # (the classification input alone, mteb's ten fits per score, is a third of this test's CPU time)
    common["twin"], common["selection_files"] = {**common["twin"], "enabled": True}, specs[:2]
    probe = {"enabled": True, "learning_rates": [1e-5, 1e-3], "max_steps": 2}
    probed = run_pipeline(tmp_path / "twin", config(**common, until="twin", probe=probe))
    chose = probed["stages"]["probe"]
    assert set(chose["selection_scores"]) == {"1e-05", "0.001"}
    lr = float(_chosen_by_mean_over_files(chose["selection_scores"]))
    assert chose["learning_rate"] == lr and probed["stages"]["twin"]["settings"]["learning_rate"] == lr
    assert probed["stages"]["twin"]["model"]["pooling"] == "cls"  # the towers' own
    # the same run on to the ensemble, the twin's towers as two members chosen on the selection files with the start
    towers = run_pipeline(
        tmp_path / "twin", config(**common, until="ensemble", probe=probe, ensemble={"twin_towers": True})
    )
    assert [row["status"] for row in towers["table"] if row["stage"] != "ensemble"] == ["skipped (done)"] * 4
    ens = towers["stages"]["ensemble"]
    twin = tmp_path / "twin" / "twin"
    assert ens["members"] == [f"{twin}/tower_1", f"{twin}/tower_2", tiny_bert]
    assert ens["weights"][2] == 1.0 and ens["weights"][0] == ens["weights"][1] and len(ens["selection_scores"]) > 1
    assert ens["dimension"] == 3 * 32


def test_one_list_of_stages_names_the_folders_the_until_values_and_the_recipe_tables():
    """STAGES is the one list: --until takes its values, the config's sections are its stages' tables (a stage's name
    unless it says otherwise), each table a stage trains with holds a trainer's training settings, and the --help of
    the command lists each stage with its folder."""
    from jtcse.commands.pipeline import HELP
    from jtcse.pipeline.stages import STAGES, TRAINED, UNTIL
    from jtcse.schema import sections
    from jtcse.training.settings import TrainingSettings

    assert UNTIL == ("warmup", "probe", "twin", "ensemble", "distill", "eval")
    tables = sections(PipelineConfig)
    assert set(tables) == {stage.metadata.table for stage in STAGES} - {None}
    assert TRAINED == ("warmup", "warmup_b", "twin", "distill") and set(TRAINED) <= set(tables)
    assert all(isinstance(getattr(PipelineConfig(), table).training, TrainingSettings) for table in TRAINED)
    assert {stage.metadata.until for stage in STAGES} == set(UNTIL)
    folders = ["tower_a", "tower_b", "probe", "twin", "ensemble", "distilled", "eval"]
    assert [stage.metadata.folder for stage in STAGES] == folders
    assert [stage.metadata.name for stage in STAGES if stage.metadata.table == stage.metadata.name] == [
        "warmup_b", "probe", "twin", "ensemble", "distill"
    ]  # fmt: skip
    for stage in STAGES:
        assert f"{stage.metadata.name} ({stage.metadata.folder}/)" in HELP


def test_the_plan_decides_everything_before_anything_runs(tiny_bert, tmp_path):
    """make_plan, one decision a function: from a sentence-transformers start the ensemble holds the twin and the
    start at the default weights, the warm-ups and the start without the twin; from a plain transformers model the
    twin trains and there is no ensemble; named members leave the start out unless asked; the twin's towers are two
    members."""
    from jtcse.pipeline.plan import make_plan
    from jtcse.pipeline.settings import ENSEMBLE_WEIGHTS
    from jtcse.pipeline.stages import DISTILL, ENSEMBLE, TWIN, WARMUP_A, WARMUP_B

    out = tmp_path / "run"
    encoder = make_plan(config(tower_a=tiny_bert, until="distill"), out, "cpu")
    assert encoder.twin and encoder.members == (str(out / "twin"), tiny_bert)
    assert encoder.weights == ENSEMBLE_WEIGHTS.twin and not encoder.choose and encoder.start_index == 1
    assert encoder.stages == (WARMUP_A, WARMUP_B, TWIN, ENSEMBLE, DISTILL) and encoder.evaluated == encoder.stages
    assert list(encoder.starting) == ["start"]  # tower II starts from tower I's model
    encoder = make_plan(config(tower_a=tiny_bert, until="distill", twin={"enabled": False}), out, "cpu")
    assert not encoder.twin and encoder.members == (str(out / "tower_a"), str(out / "tower_b"), tiny_bert)
    assert encoder.weights == ENSEMBLE_WEIGHTS.warmups and not encoder.choose and encoder.start_index == 2
    assert encoder.stages == (WARMUP_A, WARMUP_B, ENSEMBLE, DISTILL) and encoder.evaluated == encoder.stages
    assert encoder.teacher == out / "ensemble" and encoder.student == tiny_bert
    assert encoder.dev_file is None and encoder.selection == {} and encoder.selection_files == ()  # none read

    plain = make_plan(config(tower_a=tiny_bert + ".hf", until="distill"), out, "cpu")
    assert plain.twin and plain.members == () and plain.teacher == out / "twin" and TWIN in plain.stages
    assert ENSEMBLE not in plain.stages and list(plain.starting) == ["start"]

    named = make_plan(config(tower_a=tiny_bert, until="distill", ensemble={"with": [tiny_bert]}), out, "cpu")
    assert named.twin and named.members == (str(out / "twin"), tiny_bert) and named.weights is None
    towers = make_plan(config(tower_a=tiny_bert, until="ensemble", twin={"enabled": True},
                              ensemble={"twin_towers": True}), out, "cpu")  # fmt: skip
    assert towers.members[:2] == (str(out / "twin"),) * 2 and towers.weights == ENSEMBLE_WEIGHTS.twin_towers
    assert towers.member_labels[:2] == (f"{out / 'twin'}/tower_1", f"{out / 'twin'}/tower_2")
    assert not out.exists()
