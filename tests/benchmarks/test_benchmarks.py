"""The benchmarks run end to end at the smallest sizes CI can afford: their code paths, not their figures."""

from __future__ import annotations

import json

import numpy as np
import pytest
from testkit import REPO
from testkit.suite_builder import write_suite


@pytest.mark.parametrize(
    ("backend", "head"), [("auto", "random"), ("ipm", "random"), ("active_set", "random"), ("auto", "measured")]
)
def test_scale_benchmark_runs_at_a_small_size(monkeypatch, backend, head):
    # benchmarks/bench_scale.py at 500 must_keep (d_in = 768): the function CI can afford,
    # with the QP backend auto picks there (OSQP) and the one it picks at 100k, and the
    # head shaped like real ones.

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import bench_scale

    row = bench_scale.run_size(500, seed=0, activation="relu", rank=2, keep="margin", backend=backend, head=head)
    assert row["converged"] and row["cert2"] == "500/500" and row["cert1"] == "108/108", row["message"]
    assert row["qp_backends"] == ([backend] if backend != "auto" else ["osqp"])
    assert row["peak_rss_mb"] >= row["data_rss_mb"] > 0
    assert max(w for w in row["qp_working_set"] if w is not None) < row["qp_rows"][0]
    assert len(row["step_fraction"]) == len(row["min_gap_fix_per_iteration"]) == row["iterations"]
    assert row["min_gap_fix_per_iteration"][-1] == pytest.approx(row["min_gap_fix"], abs=1e-4)


def test_measured_representation_shape_in_the_scale_benchmark(monkeypatch):
    # bench_scale --distribution measured: N(μ, Σ) with the shape measured on real MiniLM
    # representations (mean share of E‖v‖², power-law spectrum), same E‖v‖² as N(0, I).

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import _synthetic

    sampler = _synthetic.Sampler.make("measured", seed=0)
    V = sampler.draw(np.random.default_rng(1), 20_000)
    energy = float(np.mean(np.sum(V * V, axis=1)))
    assert abs(energy / _synthetic.D - 1.0) < 0.02
    mean = V.mean(axis=0)
    assert abs(float(mean @ mean) / energy - _synthetic.MEASURED_MEAN_SHARE) < 0.02
    spectrum = np.linalg.eigvalsh(np.cov(V, rowvar=False))[::-1]
    k = np.arange(2, 101)
    slope = np.polyfit(np.log(k), np.log(spectrum[1:100]), 1)[0]
    assert abs(slope + _synthetic.MEASURED_SPECTRUM_SLOPE) < 0.05
    isotropic = _synthetic.Sampler.make("isotropic", seed=0).draw(np.random.default_rng(1), 4)
    assert np.array_equal(isotropic, np.random.default_rng(1).normal(size=(4, _synthetic.D)))
    with pytest.raises(ValueError, match="distribution"):
        _synthetic.Sampler.make("uniform", seed=0)


def test_measured_head_shape_in_the_scale_benchmark(monkeypatch):
    # bench_scale --head measured: the spectrum spike and class alignment measured on the real
    # MiniLM heads (σ₁ / median σ, share of w₁ − w₀ in W's top singular directions); the
    # random head has neither, and the rest of the problem is drawn the same for both.

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import _synthetic

    random, measured = (_synthetic.build(0, "relu", "isotropic", shape) for shape in _synthetic.HEADS)
    singular = np.linalg.svd(measured.head.W, compute_uv=False)
    assert abs(singular[0] / np.median(singular) - _synthetic.MEASURED_SPIKE_OVER_MEDIAN) < 0.5
    alignment = _synthetic.class_alignment(measured.head.W, measured.head.Wc, 1)
    assert abs(alignment - _synthetic.MEASURED_CLASS_ALIGNMENT) < 0.01
    assert _synthetic.class_alignment(random.head.W, random.head.Wc, 2) < 0.1
    assert 0.4 < float(np.mean(measured.keep.labels)) < 0.6  # both classes, as on a real head
    assert np.array_equal(random.head.W, _synthetic.build(0, "relu").head.W)
    assert np.array_equal(random.keep.V, measured.keep.V)  # only the head differs
    with pytest.raises(ValueError, match="head_shape"):
        _synthetic.build(0, "relu", "isotropic", "spiky")


def test_head_shape_benchmark_measures_spike_and_class_alignment(monkeypatch, distilbert_dir):
    # benchmarks/head_shape.py: the numbers behind _synthetic's measured head, on any model folder.

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import head_shape

    W = np.diag([10.0, 2.0] + [1.0] * 6)
    Wc = np.zeros((2, 8))
    Wc[1, :2] = [0.6, 0.8]  # w₁ − w₀ = 0.6 e₀ + 0.8 e₁: 60 % along σ₁'s direction, all of it in the top two
    row = head_shape.shape_of(W, Wc)
    assert (row["spike_over_median"], row["spike_over_second"]) == (10.0, 5.0)
    assert (row["alignment_r1"], row["alignment_r2"], row["alignment_r8"]) == (0.6, 1.0, 1.0)
    with pytest.raises(ValueError, match="two-class"):
        head_shape.shape_of(W, np.zeros((3, 8)))
    rows = head_shape.measure([distilbert_dir])
    assert [r["head"] for r in rows] == [str(distilbert_dir), "synthetic random", "synthetic measured"]
    assert rows[0]["d_in"] == rows[0]["d_out"] == 32 and 0.0 <= rows[0]["alignment_r2"] <= 1.0


def test_attack_shape_benchmark_measures_how_must_fix_sit_among_must_keep(
    monkeypatch, tmp_path, distilbert_dir, tiny_split
):
    # benchmarks/attack_shape.py: displacement, shared part and separability of attacked cases.

    from testkit.suite_builder import write_suite

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import attack_shape

    rng = np.random.default_rng(0)
    keep = rng.normal(size=(400, 16))
    original = keep[:50]
    shift = np.zeros(16)
    shift[0] = 8.0
    same = attack_shape.shape_of(original + shift, original, keep)  # every attack moves the same way
    assert (same["shared"], same["mean_cosine"]) == (1.0, 1.0) and same["auc"] > 0.99
    assert same["displacement"] == pytest.approx(8.0 / np.sqrt(16), rel=0.05)
    scattered = attack_shape.shape_of(original + rng.normal(size=(50, 16)), original, keep)
    assert scattered["shared"] < 0.1 and abs(scattered["mean_cosine"]) < 0.05
    # on a suite: must_fix records name their original must_keep case; one without an original is skipped
    wrong, right = tiny_split
    fix = [{**w, "original": right[i]["id"]} for i, w in enumerate(wrong)] + [{**wrong[0], "id": "orphan"}]
    folder = write_suite(tmp_path / "suite", model=distilbert_dir, fix=fix, keep=right)
    row = attack_shape.measure(folder)
    assert row["pairs"] == len(wrong) and row["d_in"] == 32
    assert row["displacement"] > 0 and 0.0 <= row["shared"] <= 1.0 and 0.0 <= row["auc"] <= 1.0


def test_scale_benchmark_on_real_sentences(monkeypatch, tmp_path, tiny_suite, tiny_split):
    # bench_scale --source sst2: a model's head and its suite's must_fix, must_keep from a
    # TSV of sentences (SST-2 train in the benchmark; here the tiny model's own cases).

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import _sst2_scale
    import bench_scale
    import paper_tables

    wrong, right = tiny_split
    rows = ["sentence\tlabel"] + [f"{r['text']}\t{['negative', 'positive'].index(r['label'])}" for r in right + wrong]
    data = tmp_path / "data"
    (data / "sst2").mkdir(parents=True)
    (data / "sst2" / "train.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    monkeypatch.setattr(paper_tables, "DATA", data)
    monkeypatch.setattr(_sst2_scale, "SUITE", tiny_suite)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    n = len(right) - 1
    row = bench_scale.run_size(n, seed=0, activation="relu", rank=2, keep="natural", source="sst2")
    assert row["source"] == "sst2" and row["n_keep"] == n and row["n_fix"] == len(wrong)
    assert row["converged"] and row["cert1"] == f"{len(wrong)}/{len(wrong)}" and row["cert2"] == f"{n}/{n}"
    assert row["sentences_scanned"] == len(rows) - 1
    assert any((tmp_path / "cache" / "warp-check" / "benchmarks" / "sst2-train-cache").iterdir())  # encoded once
    with pytest.raises(SystemExit, match=f"only {len(right)} of the {len(rows) - 1} SST-2 train sentences"):
        _sst2_scale.problem(len(right) + 1, "natural")


def test_scale_benchmark_meets_its_goal_only_with_a_converged_repair(monkeypatch, capsys):
    # bench_scale.main at 300 must_keep (its subprocess and summary): the goal's verdict needs the
    # repair converged with Cert 2 on every case, as well as the time and memory bounds.
    import json

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import bench_scale

    assert bench_scale.main(["--sizes", "300", "--compare-full", "0", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["goal"]["n_keep"] == 300 and summary["goal_met"] is True
    assert summary["sizes"][0]["cert2"] == "300/300"
    # One loop iteration: not converged, so not met, however fast.
    assert bench_scale.main(["--sizes", "300", "--compare-full", "0", "--max-iter", "1", "--json"]) == 1
    starved = json.loads(capsys.readouterr().out)
    assert not starved["sizes"][0]["converged"] and starved["goal_met"] is False


def test_the_e2e_benchmark_runs_on_a_tiny_suite(tmp_path, distilbert_dir, tiny_split, monkeypatch, capsys):
    # benchmarks/bench_e2e.py at the smallest size CI can afford: one repeat on the tiny model.
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import bench_e2e

    wrong, right = tiny_split
    suite = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong, keep=right)
    assert bench_e2e.main(["--suite-path", str(suite), "--repeat", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["exit_codes_as_expected"] is True
    loaded = {name: [r["model_loaded"] for r in runs] for name, runs in data["runs"].items()}
    assert loaded == {"plain_cold": [True], "plain_warm": [False], "repair_cold": [True], "repair_warm": [True]}
    # Wall-time ratios always exist; a tiny suite's warm run may take "0.00s" per item, so the
    # suite-run ratios may not.
    assert all(data["ratios"][name] > 0 for name in ("repair_over_plain", "warm_over_cold", "repair_over_plain_warm"))
    assert data["medians"]["plain_warm"]["wall_s"] < data["medians"]["plain_cold"]["wall_s"]
    assert not (suite / ".warp").exists()  # the runs happen on a copy
