"""The Ensemble module and ``jtcse ensemble``: combination maths, save/load, the commands that read it, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from helpers.cli import REPO, invoke_cli, one_error_line, run_python

# one worker runs the module, so that its module fixtures (towers, the saved ensemble, a fresh interpreter) are made
# once, not once per pytest-xdist worker
pytestmark = pytest.mark.xdist_group("ensemble")

SENTENCES = [
    "A man is playing a guitar.",
    "Someone plays an instrument on stage.",
    "The cat sleeps on the warm windowsill.",
    "Stock markets fell sharply on Monday.",
    "A woman slices an onion in the kitchen.",
    "Children are running across the park.",
    "The committee postponed its decision until next year.",
    "Rain is expected for most of the weekend.",
]


@pytest.fixture(scope="module")
def narrow_roberta(tmp_path_factory) -> str:
    """A RoBERTa tower of width 16 (other tokenizer and width than the BERT towers)."""
    from jtcse.testing import make_tiny_tower

    return make_tiny_tower(tmp_path_factory.mktemp("towers") / "roberta16", "roberta", hidden=16, heads=2, seed=3)


@pytest.fixture(scope="module")
def mean_bert(tmp_path_factory) -> str:
    from jtcse.testing import make_tiny_tower

    return make_tiny_tower(tmp_path_factory.mktemp("towers") / "bert_mean", "bert", seed=5, pooling="mean")


@pytest.fixture(scope="module")
def spread_bert(tmp_path_factory) -> str:
    """A tiny BERT whose sentences are far apart (random tiny towers give cos ~0.99999 to every pair)."""
    from helpers.spread_towers import make_spread_tower

    return make_spread_tower(tmp_path_factory.mktemp("towers") / "spread_bert", "bert", seed=4)


@pytest.fixture(scope="module")
def ensemble_dir(twin_dir, narrow_roberta, mean_bert, tmp_path_factory) -> str:
    """A saved 3-member concat ensemble: a twin, a RoBERTa of width 16, a mean-pooled BERT; weights 1, 2, 0.5."""
    from jtcse.training.ensemble import save_ensemble

    out = tmp_path_factory.mktemp("ensemble") / "ens"
    save_ensemble([twin_dir, narrow_roberta, mean_bert], out, weights=[1, 2, 0.5], device="cpu")
    return str(out)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _encode(model, sentences=SENTENCES) -> np.ndarray:
    return model.encode(sentences, convert_to_numpy=True, batch_size=3)


@pytest.mark.slow
def test_concat_sum_and_weights_match_the_members_own_encodes(
    twin_dir, tiny_bert, tiny_roberta, narrow_roberta, mean_bert
):
    from jtcse.modeling.build import build_ensemble
    from jtcse.modeling.loading import load_model

    twin, bert, roberta, narrow, mean = (
        load_model(p, device="cpu") for p in (twin_dir, tiny_bert, tiny_roberta, narrow_roberta, mean_bert)
    )
    models = dict(twin=twin, bert=bert, roberta=roberta, narrow=narrow, mean=mean)
    own = {name: _unit(_encode(m)) for name, m in models.items()}

    concat = build_ensemble([twin, narrow, mean], weights=[1, 2, 0.5], device="cpu")
    expected = np.concatenate([own["twin"], 2 * own["narrow"], 0.5 * own["mean"]], axis=1)
    assert concat.get_embedding_dimension() == 32 + 16 + 32
    np.testing.assert_allclose(_encode(concat), expected, atol=1e-5)

    summed = build_ensemble([bert, roberta, twin], combine="sum", weights=[0.2, 0.3, 0.5], device="cpu")
    expected = 0.2 * own["bert"] + 0.3 * own["roberta"] + 0.5 * own["twin"]
    assert summed.get_embedding_dimension() == 32
    np.testing.assert_allclose(_encode(summed), expected, atol=1e-5)

    # Equal weights: the cosine of two concatenated embeddings is the mean of the members' cosines.
    plain = build_ensemble([bert, roberta], device="cpu")
    e = _encode(plain)
    cos = (e[0] @ e[1]) / (np.linalg.norm(e[0]) * np.linalg.norm(e[1]))
    member_cos = [own[n][0] @ own[n][1] for n in ("bert", "roberta")]
    assert cos == pytest.approx(np.mean(member_cos), abs=1e-5)


def test_each_member_tokenises_for_itself(tiny_bert, narrow_roberta):
    from jtcse.modeling.build import build_ensemble

    model = build_ensemble([tiny_bert, narrow_roberta], device="cpu")
    assert not hasattr(model.model_card_data, "facts")  # a bare model: the card comes with save_ensemble
    features = model.preprocess(SENTENCES[:2])
    members = model[0].members
    for i, member in enumerate(members):
        own = member.preprocess(SENTENCES[:2])
        for key, value in own.items():
            if isinstance(value, torch.Tensor):
                torch.testing.assert_close(features[f"member_{i + 1}.{key}"], value)
            else:
                assert features[f"member_{i + 1}.{key}"] == value
    assert not torch.equal(features["member_1.input_ids"][:, :3], features["member_2.input_ids"][:, :3])


def test_gradients_reach_every_member(tiny_bert, narrow_roberta):
    from jtcse.modeling.build import build_ensemble

    model = build_ensemble([tiny_bert, narrow_roberta], device="cpu")
    model.train()
    out = model(model.preprocess(SENTENCES[:3]))["sentence_embedding"]
    (out[:, 0] + out[:, -1]).sum().backward()  # one coordinate of each member's (normalised) part
    for member in model[0].members:
        grads = [p.grad for p in member.parameters() if p.requires_grad]
        assert any(g is not None and g.abs().sum() > 0 for g in grads)


@pytest.mark.slow
def test_save_then_load_in_a_fresh_process_encodes_the_same(ensemble_dir, without_jtcse):
    """jtcse's loader in a fresh interpreter (:func:`without_jtcse`'s, once its jtcse-free part is done: nothing of
    the process that saved the ensemble) encodes as the ensemble in memory."""
    from jtcse.modeling.loading import load_model

    config = json.loads(open(f"{ensemble_dir}/ensemble_config.json", encoding="utf-8").read())
    assert config == {"combine": "concat", "weights": [1.0, 2.0, 0.5], "members": ["member_1", "member_2", "member_3"]}
    in_memory = _encode(load_model(ensemble_dir, device="cpu"))
    assert without_jtcse["run"].returncode == 0, without_jtcse["run"].stderr[-2000:]
    np.testing.assert_allclose(np.load(without_jtcse["jtcse_vectors"]), in_memory, atol=1e-6)
    assert in_memory.shape == (len(SENTENCES), 80)


@pytest.mark.slow
def test_load_model_refuses_a_member_with_foreign_module_classes(ensemble_dir, tmp_path):
    import shutil

    from jtcse.errors import JTCSEError
    from jtcse.modeling.loading import load_model

    copy = tmp_path / "ens"
    shutil.copytree(ensemble_dir, copy)
    modules_file = copy / "member_2" / "modules.json"
    modules = json.loads(modules_file.read_text())
    modules[0]["type"] = "evil_package.Backdoor"
    modules_file.write_text(json.dumps(modules))
    with pytest.raises(JTCSEError, match="foreign module classes"):
        load_model(copy)


@pytest.mark.cli
@pytest.mark.slow
def test_cli_builds_an_ensemble_that_encode_eval_index_and_distill_accept(
    ensemble_dir, twin_dir, spread_bert, tiny_bert, tmp_path
):
    from scipy.stats import spearmanr
    from typer.testing import CliRunner

    from jtcse.cli import app
    from jtcse.modeling.loading import load_model

    runner = CliRunner()
    ens = tmp_path / "ens"
    result = invoke_cli("ensemble", twin_dir, spread_bert, "-o", ens, "--combine", "sum", "--weights", "1,3")
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads(result.stdout)
    assert (summary["dimension"], summary["weights"], summary["combine"]) == (32, [1.0, 3.0], "sum")
    model = load_model(ens, device="cpu")
    twin, bert = load_model(twin_dir, device="cpu"), load_model(spread_bert, device="cpu")
    np.testing.assert_allclose(_encode(model), _unit(_encode(twin)) + 3 * _unit(_encode(bert)), atol=1e-5)

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    out = tmp_path / "emb.npy"
    result = runner.invoke(app, ["encode", str(ens), "-i", str(corpus), "-o", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    np.testing.assert_allclose(np.load(out), _encode(model), atol=1e-5)

    idx = tmp_path / "idx"
    result = runner.invoke(app, ["index", "build", str(ens), "-i", str(corpus), "-o", str(idx), "--no-progress"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["index", "search", "--index", str(idx), "-q", SENTENCES[2], "-k", "1"])
    assert result.exit_code == 0 and SENTENCES[2] in result.stdout, result.output

    # STS: the score is the Spearman of the ensemble's cosines, computed here by hand.
    index_pairs = [(0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 6), (5, 7), (6, 0)]
    pairs = [(SENTENCES[i], SENTENCES[j], float((i * 7 + j * 3) % 6)) for i, j in index_pairs]
    sts = tmp_path / "sts-dev.csv"
    sts.write_text("".join(f"g\tf\t2012\t{k}\t{s}\t{a}\t{b}\n" for k, (a, b, s) in enumerate(pairs)), encoding="utf-8")
    report = tmp_path / "sts.json"
    result = runner.invoke(app, ["eval", "sts", str(ens), "--data-dir", str(tmp_path), "--tasks", "STSB",
                                 "--task-dir", f"STSB={sts}", "-o", str(report)])  # fmt: skip
    assert result.exit_code == 0, result.output
    a, b = _unit(_encode(model, [p[0] for p in pairs])), _unit(_encode(model, [p[1] for p in pairs]))
    expected = spearmanr((a * b).sum(1), [p[2] for p in pairs]).statistic
    assert json.loads(report.read_text())["details"]["STSB"]["spearman"] == pytest.approx(expected, abs=1e-6)

    # Distillation into a single tower (UCD); the 80-wide concat ensemble teaches a 32-wide student, which
    # keeps its width (the default objective matches cosine matrices; cosine goes through a dropped projection).
    for teacher, extra in ((ens, []), (ensemble_dir, []), (ensemble_dir, ["--objective", "cosine"])):
        student = tmp_path / f"student_{len(list(tmp_path.glob('student_*')))}"
        args = ["distill", "--teacher", str(teacher), "--student", tiny_bert, "-o", str(student),
                "--corpus", str(corpus), "--max-steps", "2", "--batch-size", "4", *extra]  # fmt: skip
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        model_info = json.loads((student / "run_summary.json").read_text())["model"]
        assert model_info["teacher_dimension"] == (32 if teacher == ens else 80)
        assert load_model(student).get_embedding_dimension() == 32


@pytest.mark.slow
@pytest.mark.cli
@pytest.mark.parametrize(
    "case, expected",
    [
        ("one", "at least two"),
        ("sum_widths", "cannot be summed; use combine='concat'"),
        ("nested", "itself an ensemble"),
        ("weights_count", "2 weight(s) given for 3 ensemble members"),
        ("weights_bad", "--weights[1]: Input should be greater than 0"),
        ("combine", "combine: Input should be 'concat' or 'sum'"),
    ],
)
def test_cli_bad_input_is_one_error_line(case, expected, ensemble_dir, tiny_bert, narrow_roberta, tmp_path):
    args = {
        "one": [tiny_bert],
        "sum_widths": [tiny_bert, narrow_roberta, "--combine", "sum"],
        "nested": [ensemble_dir, tiny_bert],
        "weights_count": [tiny_bert, tiny_bert, narrow_roberta, "--weights", "1,2"],
        "weights_bad": [tiny_bert, narrow_roberta, "--weights", "1,-1"],
        "combine": [tiny_bert, narrow_roberta, "--combine", "max"],
    }[case]
    out = tmp_path / "out"
    line = one_error_line(invoke_cli("ensemble", *args, "-o", out))
    assert expected in line, line
    assert not out.exists()


def test_library_bad_input_raises_value_errors(tiny_bert, narrow_roberta):
    from jtcse.modeling.build import build_ensemble
    from jtcse.modeling.combine import check_weights
    from jtcse.modeling.ensemble import Ensemble
    from jtcse.modeling.loading import load_model

    bert, narrow = load_model(tiny_bert, device="cpu"), load_model(narrow_roberta, device="cpu")
    with pytest.raises(ValueError, match="at least two"):
        Ensemble([bert])
    with pytest.raises(ValueError, match="widths \\[32, 16\\] cannot be summed"):
        Ensemble([bert, narrow], combine="sum")
    # (a saved ensemble as a member: test_cli_bad_input_is_one_error_line)
    with pytest.raises(ValueError, match="itself an ensemble"):
        build_ensemble([bert, build_ensemble([bert, narrow], device="cpu")], device="cpu")
    with pytest.raises(ValueError, match="1 weight\\(s\\) given for 2"):
        Ensemble([bert, narrow], weights=[1])
    for bad in ([0, 1], [float("nan"), 1], ["x", 1]):
        with pytest.raises(ValueError):
            check_weights(bad, 2)


@pytest.fixture(scope="module")
def without_jtcse(ensemble_dir, tmp_path_factory) -> dict:
    """One fresh interpreter for three tests (each fresh interpreter costs seconds of imports): unable to import
    jtcse, it runs the saved card's remote-code snippet as a user pastes it, then opens the ensemble with plain
    sentence-transformers and saves its vectors; then jtcse is let in and its loader opens the ensemble and saves
    its vectors too. ``{"snippet", "run", "stdout", "module", "vectors", "jtcse_vectors"}``: the snippet's own
    output is what the run printed before ``END_OF_SNIPPET``."""
    from tests.test_model_card import split_card, usage_snippets

    remote, _ = usage_snippets(split_card(open(f"{ensemble_dir}/README.md", encoding="utf-8").read())[1])
    folder = tmp_path_factory.mktemp("without_jtcse")
    out, with_jtcse = folder / "plain.npy", folder / "jtcse.npy"
    code = (
        f"{remote}\n"
        "print('END_OF_SNIPPET')\n"
        "import json\n"
        "import numpy as np\n"
        "from sentence_transformers import SentenceTransformer\n"
        f"m = SentenceTransformer({ensemble_dir!r}, trust_remote_code=True, device='cpu')\n"
        "print(json.dumps([type(m[0]).__name__, type(m[0]).__module__]))\n"
        f"np.save({str(out)!r}, m.encode({SENTENCES!r}, convert_to_numpy=True, batch_size=3))\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _HideJtcse)]  # jtcse let in,\n"
        f"sys.path.insert(0, {str(REPO)!r})  # this checkout's\n"
        "from jtcse.modeling.loading import load_model\n"
        f"m = load_model({ensemble_dir!r}, device='cpu')\n"
        f"np.save({str(with_jtcse)!r}, m.encode({SENTENCES!r}, convert_to_numpy=True, batch_size=3))\n"
    )
    run = run_python(code, hide_jtcse=True)
    snippet_output, _, checks = run.stdout.partition("END_OF_SNIPPET\n")
    module = json.loads(checks.splitlines()[0]) if checks.strip() else None
    return {"snippet": remote, "run": run, "stdout": snippet_output, "module": module, "vectors": out,
            "jtcse_vectors": with_jtcse}  # fmt: skip


@pytest.mark.slow
def test_fresh_process_without_jtcse_opens_the_ensemble_from_its_own_code(ensemble_dir, without_jtcse):
    """The checkpoint carries ensemble.py (+ the twin member's code): plain sentence-transformers opens it."""
    from jtcse.modeling.loading import load_model

    assert json.loads(open(f"{ensemble_dir}/modules.json", encoding="utf-8").read())[0]["type"] == "ensemble.Ensemble"
    assert without_jtcse["run"].returncode == 0, without_jtcse["run"].stderr[-3000:]
    assert without_jtcse["module"] == ["Ensemble", "ensemble"]
    vectors = np.load(without_jtcse["vectors"])
    np.testing.assert_allclose(vectors, _encode(load_model(ensemble_dir, device="cpu")), atol=1e-5)


@pytest.mark.slow
def test_saved_ensemble_has_a_jtcse_model_card_whose_remote_snippet_runs_without_jtcse(
    ensemble_dir, twin_dir, without_jtcse
):
    from tests.test_model_card import check_snippet_output, split_card, table_value, usage_snippets

    meta, body = split_card(open(f"{ensemble_dir}/README.md", encoding="utf-8").read())
    assert "jtcse" in meta["tags"] and body.startswith("\n# jtcse ensemble\n")
    members = body.split("- **Members:**\n", 1)[1].split("\n- **", 1)[0].splitlines()
    assert len(members) == 3 and members[0].startswith(f"  1. `{twin_dir}`: sum of the two towers' last-layer [CLS]")
    assert members[1].endswith("16 dimensions, weight 2") and "mean pooling" in members[2]
    assert table_value(body, "combine") == "`concat`" and table_value(body, "weights") == "1, 2, 0.5"
    assert table_value(body, "output width") == "80"
    assert '"+UC" ensemble of the JTCSE paper' in body and "@article{zong2025jtcse" in body
    remote, local = usage_snippets(body)
    assert f"SentenceTransformer({ensemble_dir!r}, trust_remote_code=True)" in remote
    assert f"load_model({ensemble_dir!r})" in local
    assert without_jtcse["snippet"] == remote  # run first in its fresh interpreter (:func:`without_jtcse`)
    assert without_jtcse["run"].returncode == 0, without_jtcse["run"].stderr[-2000:]
    check_snippet_output(remote, without_jtcse["stdout"])


@pytest.mark.slow
def test_eval_mteb_scores_an_ensemble_like_our_spearman(ensemble_dir, tmp_path):
    from jtcse.evaluation.mteb_runner import run_mteb
    from jtcse.evaluation.sts import STSPairs, cosine_spearman
    from jtcse.modeling.loading import load_model

    rows = [
        (SENTENCES[i], SENTENCES[j], float((3 * i + j) % 5))
        for i, j in ((0, 1), (2, 3), (4, 5), (6, 7), (1, 4), (3, 6))
    ]
    local = tmp_path / "ens_sts.tsv"
    local.write_text(
        "sentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\t{s}\n" for a, b, s in rows), encoding="utf-8"
    )
    model = load_model(ensemble_dir, device="cpu")
    summary = run_mteb(model, (), tmp_path / "out", local_tasks=[local], batch_size=4, cache_dir=tmp_path / "cache")
    pairs = STSPairs([a for a, _, _ in rows], [b for _, b, _ in rows], np.array([s for *_, s in rows]))
    assert summary["tasks"]["Local_ens_sts"]["main_score"] == pytest.approx(cosine_spearman(model, pairs), abs=1e-6)


@pytest.mark.slow  # three model loads and an ensemble per weight
@pytest.mark.parametrize("combine", ["concat", "sum"])
def test_chosen_weights_score_as_the_ensemble_built_with_them(combine, spread_bert, tiny_bert, tmp_path, shared_data):
    """choose_weights scored every weight as the ensemble built with it scores (a concat, and --ensemble-combine sum),
    on selection inputs of three kinds (two STS files, a classification file, retrieval-pairs), from each member's
    vectors encoded once; the start alone is the floor."""
    from helpers.mteb_tasks import write_classification
    from helpers.spread_towers import make_spread_tower

    from jtcse.evaluation.selection_scoring import CachedEncoder, EnsembleEncoder, score_inputs
    from jtcse.modeling.build import build_ensemble
    from jtcse.modeling.loading import load_model
    from jtcse.training.selection import best_by_total, choose_weights, selection_scores, selection_sets

    lines = (shared_data / "stsbenchmark" / "sts-dev.csv").read_text(encoding="utf-8").splitlines()
    (tmp_path / "pairs.csv").write_text("\n".join(lines[:60]) + "\n", encoding="utf-8")
    (tmp_path / "more.csv").write_text("\n".join(lines[700:760]) + "\n", encoding="utf-8")
    specs = [str(tmp_path / "pairs.csv"), str(tmp_path / "more.csv"), str(write_classification(tmp_path / "cls.jsonl")),
             f"retrieval-pairs:{tmp_path / 'pairs.csv'}"]  # fmt: skip
    selections = selection_sets(specs, None)
    members = [spread_bert, make_spread_tower(tmp_path / "spread_b", "bert", seed=6), tiny_bert]
    grid = (0.5, 1.0, 3.0)
    weights, scores, start = choose_weights(members, 2, selections, grid=grid, device="cpu", combine=combine)
    overall = {w: {name: s["all"] for name, s in files.items()} for w, files in scores.items()}
    assert list(scores) == list(grid) and weights == [best_by_total(overall)] * 2 + [1.0]  # a teacher: the mean
    loaded = [load_model(m, device="cpu") for m in members]

    def flat(scores):  # {(input, "all" or genre): score}
        return {(name, key): value for name, files in scores.items() for key, value in files.items()}

    assert flat(start) == pytest.approx(flat(selection_scores(loaded[2], selections)), abs=1e-9)  # the start alone
    for w in grid:
        ensemble = build_ensemble(loaded, combine=combine, weights=[w, w, 1.0], device="cpu")
        assert flat(scores[w]) == pytest.approx(flat(selection_scores(ensemble, selections)), abs=1e-6), w
    if combine == "sum":  # the concat of the same vectors scores otherwise: the combination is the ensemble's
        encoders = [CachedEncoder(model) for model in loaded]
        as_concat = score_inputs(EnsembleEncoder(encoders, [3.0, 3.0, 1.0], "concat"), selections)
        assert flat(as_concat) != pytest.approx(flat(scores[3.0]))
