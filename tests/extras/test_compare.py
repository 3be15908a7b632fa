"""``warp-check compare``: WARP beside same-layer LoRA and full fine-tuning, on tiny models.

The suite is what the tiny DistilBERT gets wrong (must_fix) and right (must_keep), measured with
plain transformers (suite_builder); general / held-out files are further synthetic cases whose
accuracy under the original model is recomputed independently. Baselines train a few epochs
only: what is tested is what they change and how they are scored, not how good they get.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from testkit.suite_builder import exit_code, jsonl, margins, tree_digest, write_suite
from testkit.tiny_models import LABELS, synthetic_cases

from warp_check import ClassifierAdapter, Kind, SettingsError, load_suite
from warp_check.cli import main
from warp_check.extras.baselines import TrainSettings, train_full, train_lora, training_cases
from warp_check.extras.compare import METHODS, CompareSettings, changed_tensors, compare_suite, select_cases

FEW_EPOCHS = TrainSettings(max_epochs=2)


@pytest.fixture
def split(tiny_split: tuple[list[dict], list[dict]]) -> tuple[list[dict], list[dict]]:
    return tiny_split


@pytest.fixture
def suite(tiny_suite: Path) -> Path:
    return tiny_suite


def _extra_file(path: Path, model_dir: Path, *, seed: int, n: int, sources: bool) -> tuple[Path, float]:
    """A JSONL of synthetic cases (no kind) and the original model's accuracy on it, from transformers."""
    names = LABELS["binary"]
    rows = synthetic_cases("binary", n, seed=seed, unseen_rate=0.5)
    records = []
    for i, row in enumerate(rows):
        record = {"id": f"x{seed}-{i}", "text": row["text"], "label": names[row["label"]]}
        if sources:
            record["source"] = ("typo", "swap")[i % 2]
        records.append(record)
    path.write_text(jsonl(records), encoding="utf-8")
    gaps = margins(model_dir, [r["text"] for r in rows], [r["label"] for r in rows])
    return path, float(np.mean(gaps > 0))


def test_compare_reports_the_papers_columns_and_warp_certifies(suite, distilbert_dir, split, tmp_path):
    wrong, right = split
    general, general_acc = _extra_file(tmp_path / "general.jsonl", distilbert_dir, seed=31, n=40, sources=False)
    heldout, heldout_acc = _extra_file(tmp_path / "heldout.jsonl", distilbert_dir, seed=32, n=30, sources=True)
    before = tree_digest(distilbert_dir)
    loaded = load_suite(suite)
    hood = dataclasses.replace(loaded, repair=loaded.settings(neighbours="on"))  # off by default
    comparison = compare_suite(hood, CompareSettings(train=FEW_EPOCHS), general=general, heldout=heldout)
    assert [r.method for r in comparison.rows] == list(METHODS)
    original, lora, full, warp = comparison.rows
    for row in comparison.rows:
        assert (row.repair.total, row.remain.total) == (len(wrong), len(right))
        assert (row.general.total, row.attack.total) == (40, 30)
        assert set(row.attack_by_source) == {"typo", "swap"}
        assert sum(a.total for a in row.attack_by_source.values()) == 30
    # the original model's row, against transformers' own predictions
    assert original.repair.correct == 0 and original.remain.correct == len(right)
    assert original.general.value == pytest.approx(general_acc) and original.attack.value == pytest.approx(heldout_acc)
    # WARP converged on this suite: every must_fix fixed, every must_keep kept, certificates hold
    assert warp.details["status"] == "converged" and comparison.passed
    assert warp.repair.value == 1.0 and warp.remain.value == 1.0
    fixed = len(wrong) + warp.details["neighbour_cases"]  # the neighbourhood's cases are certified too
    assert warp.details["neighbour_cases"] > 0
    assert warp.details["certs"] == {"cert1": f"{fixed}/{fixed}", "cert2": f"{len(right)}/{len(right)}",
                                     "cert3": f"{fixed}/{fixed}"}  # fmt: skip
    assert warp.rank == 2 and warp.details["decision_variables"] == 2 * 32
    # LoRA changed only the repair layer's weight (adapter merged); full FT changed every tensor
    assert lora.details["changed_head_tensors"] == ["pre_classifier.weight"]
    assert lora.details["changed_tensors"] == 1 and lora.details["changed_upstream_tensors"] == 0
    assert lora.details["trainable_parameters"] == 2 * (32 + 32)
    assert full.details["changed_tensors"] == full.details["tensors"]
    assert lora.details["epochs"] == full.details["epochs"] == 2
    assert tree_digest(distilbert_dir) == before
    assert not (suite / ".warp").exists()  # nothing written without --out or --cache


@pytest.mark.parametrize(
    ("fixture", "layer"), [("distilbert_dir", "pre_classifier"), ("bert_dir", "bert.pooler.dense")]
)
def test_lora_trains_a_rank_r_update_of_the_repair_layer_only(request, fixture, layer, split):
    adapter = ClassifierAdapter.from_pretrained(request.getfixturevalue(fixture))
    wrong, right = split
    cases = _cases(wrong, right)
    state = {k: v.clone() for k, v in adapter.model.state_dict().items()}
    trained = train_lora(adapter, cases, TrainSettings(max_epochs=3, lr=1e-2))
    assert changed_tensors(adapter.model, trained.model) == [f"{layer}.weight"]
    delta = (trained.model.get_submodule(layer).weight - adapter.model.get_submodule(layer).weight).detach().double()
    singular = torch.linalg.svdvals(delta)
    assert singular[0] > 1e-4 and singular[2] < 1e-6 * singular[0]  # rank 2, as LoRA's B·A
    assert trained.trainable_parameters == 2 * (delta.shape[0] + delta.shape[1])
    assert all(torch.equal(state[k], v) for k, v in adapter.model.state_dict().items())  # input untouched
    assert not any("lora" in name for name in trained.model.state_dict())  # merged: a plain model


def test_full_fine_tuning_changes_every_layer_and_leaves_the_input(distilbert_dir, split):
    adapter = ClassifierAdapter.from_pretrained(distilbert_dir)
    state = {k: v.clone() for k, v in adapter.model.state_dict().items()}
    trained = train_full(adapter, _cases(*split), TrainSettings(max_epochs=1))
    changed = changed_tensors(adapter.model, trained.model)
    assert len(changed) == len(state)
    assert any(name.startswith("distilbert.transformer.layer.0.") for name in changed)
    assert all(torch.equal(state[k], v) for k, v in adapter.model.state_dict().items())


ON_A_GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device shown (WARP_TEST_CUDA=1)")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=ON_A_GPU)])
def test_the_baselines_train_and_are_scored_on_the_models_device(distilbert_dir, split, device, monkeypatch):
    # On CUDA the batches and labels once stayed on the CPU (a crash), and the scoring ran on the CPU.
    import warp_check.pipeline.evaluation as evaluation
    from warp_check.extras.compare import compare

    adapter = ClassifierAdapter.from_pretrained(distilbert_dir, device=device)
    cases = _cases(*split)
    trained = train_lora(adapter, cases, TrainSettings(max_epochs=1))
    assert {p.device.type for p in trained.model.parameters()} == {device}
    scored_on, evaluate = [], evaluation.evaluate
    # internal: the device a score was computed on is in no result
    monkeypatch.setattr(
        evaluation, "evaluate", lambda a, *args, **kw: scored_on.append(a.device) or evaluate(a, *args, **kw)
    )
    settings = CompareSettings(methods=("original", "full_ft"), train=TrainSettings(max_epochs=1))
    result = compare(adapter, cases, settings)
    assert result.row("full_ft").details["changed_upstream_tensors"] > 0  # scored by a fresh encoder pass
    assert set(scored_on) == {device}


def test_early_stopping_watches_the_training_loss(distilbert_dir, split):
    adapter = ClassifierAdapter.from_pretrained(distilbert_dir)
    cases = _cases(*split)
    # no improvement can beat a threshold of 100: the first epoch sets the best, the next one is stale
    stopped = train_lora(adapter, cases, TrainSettings(max_epochs=50, patience=1, threshold=100.0))
    assert (stopped.epochs, stopped.stop_reason) == (2, "early_stopping")
    ran_out = train_lora(adapter, cases, TrainSettings(max_epochs=3, patience=5))
    assert (ran_out.epochs, ran_out.stop_reason, len(ran_out.losses)) == (3, "max_epochs", 3)
    assert len(training_cases(cases)) == len(cases)


@pytest.mark.parametrize("train", [train_lora, train_full])
def test_after_epoch_sees_each_epoch_s_loss_and_weights_and_leaves_the_run_as_it_was(distilbert_dir, split, train):
    adapter = ClassifierAdapter.from_pretrained(distilbert_dir)
    cases = _cases(*split)
    settings = TrainSettings(max_epochs=3, lr=1e-2)
    seen = []

    def after_epoch(epoch, loss, model):
        model.eval()  # a hook may score the model: training sets train() again for the next epoch
        trained = torch.cat([p.detach().flatten() for p in model.parameters() if p.requires_grad])
        seen.append((epoch, loss, trained.clone()))

    hooked = train(adapter, cases, settings, after_epoch=after_epoch)
    plain = train(adapter, cases, settings)
    assert [(e, loss) for e, loss, _ in seen] == list(enumerate(hooked.losses, start=1))
    assert hooked.losses == plain.losses
    assert not torch.equal(seen[0][2], seen[-1][2])  # each epoch's own weights, not the last ones
    assert torch.equal(hooked.model.pre_classifier.weight, plain.model.pre_classifier.weight)


def test_training_is_reproducible_from_its_seed(distilbert_dir, split):
    adapter = ClassifierAdapter.from_pretrained(distilbert_dir)
    cases = _cases(*split)
    runs = [train_lora(adapter, cases, TrainSettings(max_epochs=2, lr=1e-2, seed=s)) for s in (0, 0, 1)]
    weights = [r.model.pre_classifier.weight for r in runs]
    assert torch.equal(weights[0], weights[1]) and runs[0].losses == runs[1].losses
    assert not torch.equal(weights[0], weights[2])


def test_subsampling_is_seeded_keeps_file_order_and_takes_every_aux(suite, split):
    cases = load_suite(suite).cases
    wrong, right = split
    pick = select_cases(cases, CompareSettings(fix_size=2, keep_size=5, seed=3))
    again = select_cases(cases, CompareSettings(fix_size=2, keep_size=5, seed=3))
    other = select_cases(cases, CompareSettings(fix_size=2, keep_size=5, seed=4))
    assert [c.id for c in pick] == [c.id for c in again] and [c.id for c in pick] != [c.id for c in other]
    assert [c.kind for c in pick] == [Kind.MUST_FIX] * 2 + [Kind.MUST_KEEP] * 5
    order = [c.id for c in cases]
    assert [order.index(c.id) for c in pick] == sorted(order.index(c.id) for c in pick)
    none_kept = select_cases(cases, CompareSettings(keep_size=0))
    assert len(none_kept) == len(wrong)
    with pytest.raises(SettingsError, match=rf"fix_size={len(wrong) + 1}: the suite has only {len(wrong)} must_fix"):
        select_cases(cases, CompareSettings(fix_size=len(wrong) + 1))


@pytest.mark.parametrize(
    ("kwargs", "field", "shown"),
    [
        ({"methods": ("warp", "lora2")}, "methods", "('warp', 'lora2')"),
        ({"methods": ()}, "methods", "()"),
        ({"methods": ("warp", "warp")}, "methods", "('warp', 'warp')"),
        ({"ranks": (2, 0)}, "ranks", "(2, 0)"),
        ({"ranks": (2, 2)}, "ranks", "(2, 2)"),
        ({"ranks": 2}, "ranks", "2"),
        ({"fix_size": 0}, "fix_size", "0"),
        ({"keep_size": -1}, "keep_size", "-1"),
        ({"threads": 0}, "threads", "0"),
        ({"seed": True}, "seed", "True"),
    ],
)
def test_compare_settings_name_the_bad_field(kwargs, field, shown):
    with pytest.raises(SettingsError) as info:
        CompareSettings(**kwargs)
    assert info.value.field == field and str(info.value).startswith(f"{field}={shown}: ")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"lr": 0.0}, "lr"), ({"lr": float("nan")}, "lr"), ({"batch_size": 0}, "batch_size"),
     ({"max_epochs": 1.5}, "max_epochs"), ({"patience": 0}, "patience"), ({"threshold": -1e-6}, "threshold"),
     ({"lora_rank": 0}, "lora_rank"), ({"lora_alpha": -4}, "lora_alpha")],
)  # fmt: skip
def test_train_settings_name_the_bad_field(kwargs, field):
    with pytest.raises(SettingsError) as info:
        TrainSettings(**kwargs)
    assert info.value.field == field and f"{field}=" in str(info.value)


def test_cli_compare_json_ranks_and_out(suite, distilbert_dir, split, tmp_path, capsys):
    wrong, right = split
    heldout, _ = _extra_file(tmp_path / "heldout.jsonl", distilbert_dir, seed=33, n=12, sources=False)
    argv = ["compare", str(suite), "--methods", "original,warp", "--ranks", "1,2", "--heldout", str(heldout)]
    capsys.readouterr()  # transformers' loading bars from _extra_file
    assert main([*argv, "--json", "-q"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert captured.err == ""
    assert data["format"] == "warp-check-compare/1" and data["passed"] is True
    assert [(m["method"], m["rank"]) for m in data["methods"]] == [("original", None), ("warp", 1), ("warp", 2)]
    assert data["sizes"] | {"general": None} == {
        "must_fix": len(wrong),
        "must_keep": len(right),
        "aux": 0,
        "must_fix_available": len(wrong),
        "must_keep_available": len(right),
        "general": None,
        "heldout": 12,
    }
    for row in data["methods"]:
        assert set(row) >= {"repair_acc", "remain_acc", "general_acc", "attack_gen", "seconds", "counts", "details"}
        assert row["general_acc"] is None and 0.0 <= row["attack_gen"] <= 1.0
    assert data["methods"][2]["repair_acc"] == 1.0 and data["methods"][2]["remain_acc"] == 1.0

    out = tmp_path / "reports" / "compare.md"
    assert main([*argv, "--fix-size", "2", "--keep-size", "4", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| Method | Repair Acc | Remain Acc | General Acc | Atk. Gen | Time |" in text
    assert "| WARP (r=1) | 100.0% (2/2) | 100.0% (4/4) | n/a |" in text
    assert out.read_text(encoding="utf-8") in text
    written = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert written["sizes"]["must_fix"] == 2 and written["settings"]["fix_size"] == 2
    assert sorted(p.name for p in out.parent.iterdir()) == ["compare.json", "compare.md"]


def test_cli_compare_exits_1_when_warp_does_not_converge(tmp_path, distilbert_dir, split, capsys):
    wrong, right = split
    folder = write_suite(tmp_path / "s", model=distilbert_dir, fix=wrong, keep=right, extra="[repair]\nmax_iter = 1\n")
    assert main(["compare", str(folder), "--methods", "original,warp", "-q"]) == 1
    captured = capsys.readouterr()
    assert "| WARP (r=2) (not_converged) | " in captured.out
    assert "warp-check compare: WARP (r=2) did not converge" in captured.err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--ranks", "0"], "warp-check compare: error: --ranks: ranks=(0,): must be a non-empty sequence"),
        (["--ranks", "40"], "--ranks: ranks=(40,): rank 40 exceeds the repair layer's smallest dimension 32"),
        (["--ranks", "x"], "argument --ranks: 'x' is not a comma-separated list of integers"),
        (["--methods", "warp,qlora"], "--methods: methods=('warp', 'qlora'): unknown method 'qlora'"),
        (["--fix-size", "999"], "--fix-size: fix_size=999: the suite has only"),
        (["--epochs", "0"], "--epochs: max_epochs=0: must be an integer >= 1"),
        (["--heldout", "{bad}"], "{bad}:2: field 'label': unknown label 'neutral'"),
        (["--general", "{missing}"], "{missing}: cannot read the file"),
        (["--out", "{model}/cmp.md"], "will not write into the input model's folder"),
    ],
)
def test_cli_compare_usage_mistakes_exit_2_with_one_line(suite, distilbert_dir, tmp_path, extra, message, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "good movie", "label": "positive"}\n{"text": "meh", "label": "neutral"}\n')
    names = {"bad": str(bad), "missing": str(tmp_path / "missing.jsonl"), "model": str(distilbert_dir)}
    before = tree_digest(distilbert_dir)
    argv = ["compare", str(suite), "--methods", "original,warp", "-q", *[e.format(**names) for e in extra]]
    assert exit_code(argv) == 2
    err = capsys.readouterr().err
    assert message.format(**names) in err and "Traceback" not in err
    assert tree_digest(distilbert_dir) == before


def _cases(wrong: list[dict], right: list[dict]):
    from warp_check import Case

    ids = {"negative": 0, "positive": 1}
    return [
        Case(id=r["id"], text=r["text"], label=ids[r["label"]], kind=kind)
        for rows, kind in ((wrong, Kind.MUST_FIX), (right, Kind.MUST_KEEP))
        for r in rows
    ]


def test_restore_best_keeps_the_lowest_loss_epoch(distilbert_dir, split):
    adapter = ClassifierAdapter.from_pretrained(distilbert_dir)
    cases = _cases(*split)
    # A learning rate this high makes the training loss jump about, so its lowest epoch is not the last.
    rough = {"lr": 0.5, "max_epochs": 6, "patience": 6}
    last = train_lora(adapter, cases, TrainSettings(**rough))
    best = train_lora(adapter, cases, TrainSettings(**rough, restore_best=True))
    lowest = 1 + min(range(len(best.losses)), key=best.losses.__getitem__)
    assert best.losses == last.losses and lowest < len(best.losses), best.losses  # same run, a non-final best
    assert (last.kept_epoch, best.kept_epoch) == (len(last.losses), lowest)
    # the weights returned are those the run had after that epoch: a run stopped there has them too
    stopped_there = train_lora(adapter, cases, TrainSettings(**{**rough, "max_epochs": lowest}))
    assert torch.equal(best.model.pre_classifier.weight, stopped_there.model.pre_classifier.weight)
    assert not torch.equal(best.model.pre_classifier.weight, last.model.pre_classifier.weight)
    with pytest.raises(SettingsError, match="restore_best"):
        TrainSettings(restore_best="yes")


def test_cli_compare_restore_best_is_reported(suite, capsys):
    argv = ["compare", str(suite), "--methods", "original,lora", "--epochs", "3", "-q"]
    assert main([*argv, "--restore-best", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["settings"]["train"]["restore_best"] is True
    lora = data["methods"][1]["details"]
    lowest = 1 + min(range(len(lora["losses"])), key=lora["losses"].__getitem__)
    assert lora["kept_epoch"] == lowest and lora["epochs"] == 3
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "threshold 1e-06; weights of the last epoch; seed 0):" in text
    assert "| Epochs | Stopped by | Weights of epoch | Final loss |" in text
    assert "| 3 | max epochs | 3 |" in text
