"""Choosing on selection inputs of every kind (jtcse.training.selection, jtcse.evaluation.selection_scoring): the
paired rule and the share kept by hand, what a selection input is and what of it is read, and that a selection
score is the score `jtcse eval mteb --local-task` gives for the same model and data."""

from __future__ import annotations

import json
import math
import shutil

import pytest
from helpers.mteb_tasks import TEST, TRAIN, write_beir, write_sts
from helpers.sts import write_stsb

from jtcse.errors import JTCSEError

# ---------------------------------------------------------------------------------------------------- by hand


def test_the_paired_difference_and_its_standard_error_by_hand():
    """Totals per seed (the mean over the inputs): candidate 0.80, 0.82, 0.81 against 0.79, 0.80, 0.80; the
    differences 0.01, 0.02, 0.01 have mean 0.04/3, standard deviation (ddof=1) sqrt(((-1/3)² + (2/3)² + (-1/3)²) /
    2) / 100 = sqrt(1/3) / 100, and standard error that over sqrt(3): 1/300."""
    from jtcse.training.selection import paired_difference

    candidate = {1: {"a": 0.85, "b": 0.75}, 2: {"a": 0.84, "b": 0.80}, 3: {"a": 0.81, "b": 0.81}}
    row = {1: {"a": 0.80, "b": 0.78}, 2: {"a": 0.80, "b": 0.80}, 3: {"a": 0.79, "b": 0.81}}
    difference = paired_difference(candidate, row)
    assert difference.n == 3
    assert difference.mean == pytest.approx(0.04 / 3)
    assert difference.stderr == pytest.approx(1 / 300)
    assert difference.beats and not difference.loses  # 0.0133 > 2 × 0.0033
    reverse = paired_difference(row, candidate)
    assert reverse.mean == pytest.approx(-0.04 / 3) and reverse.loses and not reverse.beats
    noisy = {1: {"a": 0.83, "b": 0.79}, 2: {"a": 0.79, "b": 0.80}, 3: {"a": 0.80, "b": 0.81}}
    # differences +0.02, -0.005, +0.005: mean 0.02/3, sd sqrt((1.333² + 1.1667² + 0.1667²)/2)/100 = 0.012583
    loose = paired_difference(noisy, row)
    assert loose.mean == pytest.approx(0.02 / 3) and loose.stderr == pytest.approx(0.0125831 / math.sqrt(3), rel=1e-5)
    assert not loose.beats and not loose.loses  # 0.0067 < 2 × 0.0073
    one = paired_difference({7: {"a": 0.9}}, {7: {"a": 0.8}})  # one seed: a difference, no standard error
    assert one.mean == pytest.approx(0.1) and math.isnan(one.stderr) and not one.beats and not one.loses
    with pytest.raises(ValueError, match="the same seeds"):
        paired_difference({1: {"a": 0.8}, 2: {"a": 0.8}}, {1: {"a": 0.8}, 3: {"a": 0.8}})
    with pytest.raises(ValueError, match="seed 1: the candidate and the row to beat were scored on other inputs"):
        paired_difference({1: {"a": 0.8}}, {1: {"b": 0.8}})


def test_the_candidate_replaces_the_row_to_beat_only_by_the_paired_rule_otherwise_the_cheaper_row_stays():
    from jtcse.training.selection import paired_choice

    row = {1: {"a": 0.80}, 2: {"a": 0.80}, 3: {"a": 0.80}}
    better = {1: {"a": 0.81}, 2: {"a": 0.82}, 3: {"a": 0.81}}  # +0.0133 ± 0.0033: beats
    noise = {1: {"a": 0.83}, 2: {"a": 0.79}, 3: {"a": 0.80}}  # +0.0067 ± 0.012: neither beats
    worse = {1: {"a": 0.79}, 2: {"a": 0.78}, 3: {"a": 0.79}}  # the row beats it
    scores = {"row": row, "better": better, "noise": noise, "worse": worse}
    dear = {"row": 1.0, "better": 2.0, "noise": 2.0, "worse": 2.0}
    cheap = {"row": 1.0, "better": 0.5, "noise": 0.5, "worse": 0.5}
    assert paired_choice(scores, "better", "row", dear) == "better"  # it beats the row: the cost does not matter
    assert paired_choice(scores, "noise", "row", dear) == "row"  # not told apart: the cheaper stays
    assert paired_choice(scores, "noise", "row", cheap) == "noise"
    assert paired_choice(scores, "noise", "row", {"row": 1.0, "noise": 1.0}) == "row"  # equal cost: the row
    assert paired_choice(scores, "worse", "row", cheap) == "row"  # cheaper, but the row beats it


def test_the_share_of_the_teachers_gain_the_student_keeps_by_hand():
    from jtcse.training.selection import share_kept, shares_kept

    start = {"sts": 0.80, "trec": 0.50, "sick": 0.70}
    teacher = {"sts": 0.84, "trec": 0.60, "sick": 0.69}  # gains 0.04, 0.10, loses 0.01: mean gain 0.13/3
    student = {"sts": 0.83, "trec": 0.52, "sick": 0.71}  # gains 0.03, 0.02, 0.01: mean gain 0.06/3
    kept = shares_kept(student, teacher, start)
    assert kept["inputs"]["sts"] == pytest.approx(0.75) and kept["inputs"]["trec"] == pytest.approx(0.2)
    assert kept["inputs"]["sick"] is None  # the teacher did not gain there: nothing to keep
    assert kept["total"] == pytest.approx(0.06 / 0.13)
    assert share_kept(0.79, 0.84, 0.80) == pytest.approx(-0.25)  # the student fell below the start
    assert share_kept(0.90, 0.84, 0.80) == pytest.approx(2.5)  # it gained more than its teacher
    assert share_kept(0.81, 0.80, 0.80) is None  # no gain at all
    with pytest.raises(ValueError, match="the same inputs"):
        shares_kept({"sts": 0.8}, teacher, start)


def test_a_selection_input_is_fingerprinted_by_its_kind_and_content_a_folder_by_every_file_in_it(tmp_path):
    from jtcse.training.selection import selection_fingerprint

    sts = write_stsb(tmp_path / "a" / "sts.csv")
    copy = tmp_path / "b" / "sts.csv"
    copy.parent.mkdir()
    shutil.copy(sts, copy)
    assert selection_fingerprint(sts) == selection_fingerprint(copy)  # moved or copied: the same input
    assert selection_fingerprint(sts) != selection_fingerprint(f"retrieval-pairs:{sts}")  # another kind of input
    assert selection_fingerprint(sts).startswith("sha256:")
    folder = _classification_folder(tmp_path / "cls")
    before = selection_fingerprint(folder)
    (folder / "train.jsonl").write_text((folder / "train.jsonl").read_text() + '{"text": "More", "label": "pos"}\n')
    assert selection_fingerprint(folder) != before  # a file in the folder edited in place: another input
    with pytest.raises(JTCSEError, match="selection file not found: "):
        selection_fingerprint(tmp_path / "nope")


# ---------------------------------------------------------------------------------------------------- mteb


def _classification_folder(folder):
    """A classification folder whose train split is the tiny reviews (11 rows) and whose test split is not even
    JSON: choosing never reads it."""
    folder.mkdir(parents=True)
    rows = [{"text": text, "label": label} for text, label in TRAIN + TEST]
    (folder / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    (folder / "test.jsonl").write_text("the reported split: never read when choosing\n", encoding="utf-8")
    return folder


@pytest.mark.slow  # imports mteb
def test_selection_inputs_of_every_kind_are_read_and_checked(tmp_path):
    """Each kind from its layout or TYPE:; a classification set on its train split alone, a stratified half held out
    (the same half every time); the dev file refused as a non-STS input; an input given twice refused."""
    from jtcse.training.selection import selection_sets

    sts, dev = write_sts(tmp_path / "sts.tsv"), write_stsb(tmp_path / "dev.csv")
    folder = _classification_folder(tmp_path / "cls")
    specs = [str(sts), str(folder), str(write_beir(tmp_path / "beir")), f"retrieval-pairs:{sts}"]
    sets = selection_sets(specs, dev)
    assert {spec: item.kind for spec, item in sets.items()} == dict(
        zip(specs, ["sts", "classification", "retrieval", "retrieval-pairs"], strict=True)
    )
    assert sets[str(sts)].pairs.sentences1[0] == "A man plays the guitar." and sets[str(sts)].pairs.genres is None
    divided = sets[str(folder)].task.dataset
    names = divided["train"].features["label"].names
    held = [(text, names[label]) for text, label in zip(divided["test"]["text"], divided["test"]["label"], strict=True)]
    learn = list(zip(divided["train"]["text"], [names[i] for i in divided["train"]["label"]], strict=True))
    assert sorted(held + learn) == sorted(TRAIN + TEST)  # the train split, divided; nothing of test.jsonl
    assert len(held) == 6 and sorted(label for _, label in held).count("pos") == 3  # a stratified half (6 pos, 5 neg)
    again = selection_sets([str(folder)], None)[str(folder)].task.dataset
    assert again["test"]["text"] == divided["test"]["text"]  # seeded: the same half every time

    with pytest.raises(JTCSEError, match=rf"the selection input retrieval-pairs:{dev} is the dev file"):
        selection_sets([f"retrieval-pairs:{dev}"], dev)
    copy = tmp_path / "copy.csv"
    shutil.copy(dev, copy)
    with pytest.raises(JTCSEError, match="is the dev file"):  # a copy of it too
        selection_sets([f"retrieval-pairs:{copy}"], dev)
    with pytest.raises(JTCSEError, match="given twice"):
        selection_sets([str(folder), f"classification:{tmp_path / '.' / 'cls'}"], None)
    lonely = _classification_folder(tmp_path / "lonely")
    with (lonely / "train.jsonl").open("a", encoding="utf-8") as handle:
        handle.write('{"text": "So-so", "label": "meh"}\n')
    with pytest.raises(JTCSEError, match=r"label 'meh' has 1 train row; .* at least 2 rows of every label"):
        selection_sets([str(lonely)], None)


@pytest.mark.slow  # imports mteb, runs it
def test_a_selection_score_is_the_score_eval_mteb_gives_for_the_same_model_and_data(tiny_bert, tmp_path):
    """selection_scores against run_mteb (what `jtcse eval mteb --local-task` runs) on each kind: an STS-B file, an
    STS table, a BEIR folder, retrieval-pairs of the STS table, and the classification folder's held-out half
    written out as a train/test file. Each distinct text is encoded once."""
    from jtcse.evaluation.mteb_runner import run_mteb
    from jtcse.modeling.loading import load_model
    from jtcse.training.selection import selection_scores, selection_sets

    stsb, sts = write_stsb(tmp_path / "stsb.csv"), write_sts(tmp_path / "sts.tsv")
    folder, beir = _classification_folder(tmp_path / "cls"), write_beir(tmp_path / "beir")
    specs = [str(stsb), str(sts), str(folder), str(beir), f"retrieval-pairs:{sts}"]
    sets = selection_sets(specs, None)
    scores = selection_scores(tiny_bert, sets, device="cpu")

    divided, file = sets[str(folder)].task.dataset, tmp_path / "divided.jsonl"
    names = divided["train"].features["label"].names
    with file.open("w", encoding="utf-8") as handle:
        for split in ("train", "test"):
            for text, label in zip(divided[split]["text"], divided[split]["label"], strict=True):
                handle.write(json.dumps({"text": text, "label": names[label], "split": split}) + "\n")
    model = load_model(tiny_bert, device="cpu")  # as eval mteb loads it
    local = [str(stsb), str(sts), str(file), str(beir), f"retrieval-pairs:{sts}"]
    run = run_mteb(model, (), tmp_path / "out", local_tasks=local, batch_size=4, cache_dir=tmp_path / "cache")
    mteb = [entry["main_score"] for entry in run["tasks"].values()]
    assert [scores[spec]["all"] for spec in specs] == pytest.approx(mteb, abs=1e-6)
    assert set(scores[str(stsb)]) == {"all", "main-captions"}  # an STS-B file: per genre too
    assert all(0 <= scores[spec]["all"] <= 1 for spec in specs[2:])  # fractions, as mteb gives them


@pytest.mark.slow
def test_each_text_is_encoded_once_per_model_across_inputs(tiny_bert, tmp_path):
    from jtcse.evaluation.selection_scoring import CachedEncoder, score_inputs
    from jtcse.modeling.loading import load_model
    from jtcse.training.selection import selection_sets

    sts = write_sts(tmp_path / "sts.tsv")
    sets = selection_sets([str(sts), f"retrieval-pairs:{sts}"], None)
    encoder = CachedEncoder(load_model(tiny_bert, device="cpu"))
    calls = []
    encode = encoder.wrapper.encode
    encoder.wrapper.encode = lambda inputs, **kwargs: calls.append(1) or encode(inputs, **kwargs)
    score_inputs(encoder, sets)
    pairs = sets[str(sts)].pairs
    assert len(calls) == 1 and list(encoder.tables) == [None]  # the retrieval corpus and queries came from the cache
    assert len(encoder.tables[None]) == len(set(pairs.sentences1 + pairs.sentences2))


@pytest.mark.slow
def test_given_weights_with_selection_inputs_are_reported_not_chosen(tiny_bert, tmp_path):
    """--selection-file with --ensemble-weights: the plan reads the inputs (the eval stage reports every model on
    them) and keeps the weights given; stopping before the eval stage, nothing reads them."""
    from jtcse.pipeline.plan import make_plan
    from jtcse.pipeline.settings import PipelineConfig

    dev, sts = write_stsb(tmp_path / "dev.csv"), write_sts(tmp_path / "sts.tsv")
    folder = _classification_folder(tmp_path / "cls")
    values = dict(tower_a=tiny_bert, dev_file=str(dev), selection_files=[str(sts), str(folder)],
                  ensemble={"weights": [2.0, 1.0]})  # fmt: skip
    plan = make_plan(PipelineConfig.from_values(values), tmp_path / "out", "cpu")
    assert not plan.choose and plan.weights == (2.0, 1.0) and list(plan.selection) == [str(sts), str(folder)]
    chosen = make_plan(PipelineConfig.from_values({**values, "ensemble": {}}), tmp_path / "out", "cpu")
    assert chosen.choose and chosen.weights is None and list(chosen.selection) == [str(sts), str(folder)]
    early = make_plan(PipelineConfig.from_values({**values, "until": "distill"}), tmp_path / "out", "cpu")
    assert early.selection == {} and early.selection_files == ()
