"""The benchmarks run end to end at the smallest sizes CI can afford: their code paths, not their figures;
and their records: what --save writes, what benchmarks/results/ holds, the commands RESULTS.md prints."""

from __future__ import annotations

import hashlib
import importlib
import json
import re
import subprocess
import sys

import numpy as np
import pytest
from testkit import REPO
from testkit.suite_builder import write_suite

from benchmarks import attack_shape, bench_e2e, bench_scale, data, head_shape, results, sst2_problem, synthetic

SCRIPTS = (
    "bench_qp",
    "bench_repair",
    "bench_scale",
    "bench_e2e",
    "bench_encode",
    "paper_tables",
    "head_shape",
    "attack_shape",
    "families",
    "generalise",
    "multi_label",
    "compare_releases",
    "ner_wikiann",
    "budget_price",
)


@pytest.mark.parametrize(
    ("backend", "head"),
    [
        ("auto", "random"),
        pytest.param("ipm", "random", marks=pytest.mark.slow),
        ("active_set", "random"),
        ("auto", "measured"),
    ],
)
def test_scale_benchmark_runs_at_a_small_size(backend, head):
    # benchmarks.bench_scale at 500 must_keep (d_in = 768): the function CI can afford,
    # with the QP backend auto picks there (OSQP) and the one it picks at 100k, and the
    # head shaped like real ones.
    row = bench_scale.run_size(500, seed=0, activation="relu", rank=2, keep="margin", backend=backend, head=head)
    assert row["converged"] and row["cert2"] == "500/500" and row["cert1"] == "108/108", row["message"]
    assert row["qp_backends"] == ([backend] if backend != "auto" else ["osqp"])
    # every QP the loop solved is recorded with its time (a loop that finds ``solve`` elsewhere would read 0)
    assert len(row["qp_seconds_per_iteration"]) >= row["iterations"] and row["qp_seconds"] > 0
    assert row["peak_rss_mb"] >= row["data_rss_mb"] > 0
    assert max(w for w in row["qp_working_set"] if w is not None) < row["qp_rows"][0]
    assert len(row["step_fraction"]) == len(row["min_gap_fix_per_iteration"]) == row["iterations"]
    assert row["min_gap_fix_per_iteration"][-1] == pytest.approx(row["min_gap_fix"], abs=1e-4)


def test_scale_benchmark_holds_a_suite_past_resident_keep_at_another_width():
    # bench_scale --d-in: the synthetic rows and layer at another width, v stored float32; past
    # resident_keep (--resident-keep) the loop holds the cases at risk and checks the rest from outside.
    row = bench_scale.run_size(2000, seed=0, activation="relu", rank=2, keep="margin", d_in=48, resident_keep=200)
    assert row["resident_keep"] == 200
    assert row["d_in"] == 48 and row["representations_dtype"] == "float32"
    assert row["converged"] and row["cert2"] == "2000/2000" and row["cert1"] == "108/108", row["message"]
    assert 0 < row["held_outside"] <= 1800
    assert row["keep_in_loop_share"] == pytest.approx(1 - row["held_outside"] / 2000)
    assert row["rounds"] >= 1 and row["seconds_per_1k_keep"] > 0


def test_scale_benchmark_goals_by_size_and_width():
    assert bench_scale.goal_rss_mb(100_000, 768) == 4096  # issue 6
    assert bench_scale.goal_rss_mb(1_000_000, 384) == 4096 and bench_scale.goal_rss_mb(1_000_000, 768) == 8192


def test_measured_representation_shape_in_the_scale_benchmark():
    # bench_scale --distribution measured: N(μ, Σ) with the shape measured on real MiniLM
    # representations (mean share of E‖v‖², power-law spectrum), same E‖v‖² as N(0, I).
    sampler = synthetic.Sampler.make("measured", seed=0)
    V = sampler.draw(np.random.default_rng(1), 20_000)
    energy = float(np.mean(np.sum(V * V, axis=1)))
    assert abs(energy / synthetic.D - 1.0) < 0.02
    mean = V.mean(axis=0)
    assert abs(float(mean @ mean) / energy - synthetic.MEASURED_MEAN_SHARE) < 0.02
    spectrum = np.linalg.eigvalsh(np.cov(V, rowvar=False))[::-1]
    k = np.arange(2, 101)
    slope = np.polyfit(np.log(k), np.log(spectrum[1:100]), 1)[0]
    assert abs(slope + synthetic.MEASURED_SPECTRUM_SLOPE) < 0.05
    isotropic = synthetic.Sampler.make("isotropic", seed=0).draw(np.random.default_rng(1), 4)
    assert np.array_equal(isotropic, np.random.default_rng(1).normal(size=(4, synthetic.D)))
    with pytest.raises(ValueError, match="distribution"):
        synthetic.Sampler.make("uniform", seed=0)


def test_measured_head_shape_in_the_scale_benchmark():
    # bench_scale --head measured: the spectrum spike and class alignment measured on the real
    # MiniLM heads (σ₁ / median σ, share of w₁ − w₀ in W's top singular directions); the
    # random head has neither, and the rest of the problem is drawn the same for both.
    random, measured = (synthetic.build(0, "relu", "isotropic", shape) for shape in synthetic.HEADS)
    singular = np.linalg.svd(measured.head.W, compute_uv=False)
    assert abs(singular[0] / np.median(singular) - synthetic.MEASURED_SPIKE_OVER_MEDIAN) < 0.5
    alignment = synthetic.class_alignment(measured.head.W, measured.head.Wc, 1)
    assert abs(alignment - synthetic.MEASURED_CLASS_ALIGNMENT) < 0.01
    assert synthetic.class_alignment(random.head.W, random.head.Wc, 2) < 0.1
    assert 0.4 < float(np.mean(measured.keep.labels)) < 0.6  # both classes, as on a real head
    assert np.array_equal(random.head.W, synthetic.build(0, "relu").head.W)
    assert np.array_equal(random.keep.V, measured.keep.V)  # only the head differs
    with pytest.raises(ValueError, match="head_shape"):
        synthetic.build(0, "relu", "isotropic", "spiky")


def test_head_shape_benchmark_measures_spike_and_class_alignment(distilbert_dir):
    # benchmarks.head_shape: the numbers behind the synthetic measured head, on any model folder.
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


def test_attack_shape_benchmark_measures_how_must_fix_sit_among_must_keep(tmp_path, distilbert_dir, tiny_split):
    # benchmarks.attack_shape: displacement, shared part and separability of attacked cases.
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
    wrong, right = tiny_split
    rows = ["sentence\tlabel"] + [f"{r['text']}\t{['negative', 'positive'].index(r['label'])}" for r in right + wrong]
    folder = tmp_path / "data"
    (folder / "sst2").mkdir(parents=True)
    (folder / "sst2" / "train.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    monkeypatch.setattr(data, "DATA", folder)
    monkeypatch.setitem(sst2_problem.SUITES, "distilbert", tiny_suite)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    n = len(right) - 1
    row = bench_scale.run_size(n, seed=0, activation="relu", rank=2, keep="natural", source="sst2")
    assert row["source"] == "sst2" and row["n_keep"] == n and row["n_fix"] == len(wrong)
    assert row["converged"] and row["cert1"] == f"{len(wrong)}/{len(wrong)}" and row["cert2"] == f"{n}/{n}"
    assert row["sentences_scanned"] == len(rows) - 1
    assert any((tmp_path / "cache" / "warp-check" / "benchmarks" / "sst2-train-cache").iterdir())  # encoded once
    with pytest.raises(SystemExit, match=f"only {len(right)} of the {len(rows) - 1} SST-2 train sentences"):
        sst2_problem.problem(len(right) + 1, "natural")
    # Size 0: every sentence that qualifies; --paper-loop: the rank stays where it starts.
    every = bench_scale.run_size(0, seed=0, activation="relu", rank=2, keep="natural", source="sst2", paper_loop=True)
    assert every["n_keep"] == len(right) and every["loop"] == "paper" and set(every["ranks"]) == {2}


def test_scale_benchmark_grows_real_sentences_by_their_seeded_perturbations(
    monkeypatch, tmp_path, tiny_suite, tiny_split
):
    # bench_scale --source sst2 --perturbations k: past the sentences, k perturbations of each (the
    # suite's own strategies), round by round, each with its sentence's label; drawn once and kept.
    wrong, right = tiny_split
    rows = ["sentence\tlabel"] + [f"{r['text']}\t{['negative', 'positive'].index(r['label'])}" for r in right]
    (tmp_path / "data" / "sst2").mkdir(parents=True)
    (tmp_path / "data" / "sst2" / "train.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    monkeypatch.setattr(data, "DATA", tmp_path / "data")
    monkeypatch.setitem(sst2_problem.SUITES, "distilbert", tiny_suite)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    sentences = sst2_problem.sentences()
    pool = sst2_problem.perturbed_pool(2)
    assert pool[: len(sentences)] == sentences
    first, second = pool[len(sentences) :][: len(sentences)], pool[2 * len(sentences) :]
    assert all(p["id"].endswith("~0") for p in first) and all(p["id"].endswith("~1") for p in second)
    by_id = {s["id"]: s for s in sentences}
    for p in pool[len(sentences) :]:
        original = by_id[p["id"].split("~")[0]]
        assert p["label"] == original["label"] and p["text"] != original["text"] and p["text"].strip()
    kept = next((tmp_path / "cache" / "warp-check" / "benchmarks" / "sst2-perturbed").iterdir())
    kept.write_text("", encoding="utf-8")  # read back, not drawn again: a damaged file is refused
    with pytest.raises(SystemExit, match="holds 0 sentences"):
        sst2_problem.perturbed_pool(2)
    kept.unlink()
    assert sst2_problem.perturbed_pool(2) == pool  # seeded: the same draws again
    # Past a draw's size, further draws: the smaller pool stays whole (its draws and their cached
    # representations), and a later draw adds only texts no earlier one gave
    monkeypatch.setattr(sst2_problem, "DRAW_SIZE", 2)
    larger = sst2_problem.perturbed_pool(3)
    assert larger[: len(pool)] == pool and len(larger) > len(pool)
    for p in larger[len(pool) :]:
        sentence = p["id"].split("~")[0]
        assert p["text"] not in {q["text"] for q in pool if q["id"].split("~")[0] == sentence}
        assert p["id"].endswith("~2") and p["label"] == by_id[sentence]["label"]
    n = len(right) + 3
    row = bench_scale.run_size(n, seed=0, activation="relu", rank=2, keep="natural", source="sst2", perturbations=2)
    assert row["n_keep"] == n and row["perturbed_keep"] >= 3 and row["pool"] == len(pool)
    assert row["converged"] and row["cert2"] == f"{n}/{n}" and row["representations_dtype"] == "float32"
    with pytest.raises(SystemExit):
        bench_scale.main(["--sizes", "10", "--perturbations", "2"])  # synthetic rows have no sentences


@pytest.mark.slow
def test_scale_benchmark_meets_its_goal_only_with_a_converged_repair(capsys):
    # bench_scale.main at 300 must_keep (its subprocess and summary): the goal's verdict needs the
    # repair converged with Cert 2 on every case, as well as the time and memory bounds.
    assert bench_scale.main(["--sizes", "300", "--compare-full", "0", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["result"]
    assert summary["goal"]["n_keep"] == 300 and summary["goal_met"] is True
    assert summary["sizes"][0]["cert2"] == "300/300"
    # One loop iteration: not converged, so not met, however fast.
    assert bench_scale.main(["--sizes", "300", "--compare-full", "0", "--max-iter", "1", "--json"]) == 1
    starved = json.loads(capsys.readouterr().out)["result"]
    assert not starved["sizes"][0]["converged"] and starved["goal_met"] is False


@pytest.mark.slow
def test_the_e2e_benchmark_runs_on_a_tiny_suite(tmp_path, distilbert_dir, tiny_split, capsys):
    # benchmarks.bench_e2e at the smallest size CI can afford: one repeat on the tiny model.
    wrong, right = tiny_split
    suite = write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong, keep=right)
    assert bench_e2e.main(["--suite-path", str(suite), "--repeat", "1", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)["result"]
    assert result["exit_codes_as_expected"] is True
    loaded = {name: [r["model_loaded"] for r in runs] for name, runs in result["runs"].items()}
    assert loaded == {
        "plain_cold": [True],
        "plain_warm": [False],
        "repair_cold": [True],
        "repair_warm": [True],
        "repair_cold_neighbours": [True],
    }
    # Wall-time ratios always exist; a tiny suite's warm run may take "0.00s" per item, so the
    # suite-run ratios may not.
    ratios = ("repair_over_plain", "repair_neighbours_over_plain", "warm_over_cold", "repair_over_plain_warm")
    assert all(result["ratios"][name] > 0 for name in ratios)
    assert result["medians"]["plain_warm"]["wall_s"] < result["medians"]["plain_cold"]["wall_s"]
    assert not (suite / ".warp").exists()  # the runs happen on a copy


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_benchmark_says_how_to_run_it(name, capsys):
    module = importlib.import_module(f"benchmarks.{name}")
    with pytest.raises(SystemExit) as stopped:
        module.main(["--help"])
    assert stopped.value.code == 0
    out = capsys.readouterr().out
    assert f"usage: python -m benchmarks.{name}" in out and "--save" in out and "--json" in out


def test_the_benchmarks_run_as_modules_from_the_repository_root():
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_repair", "--help"],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and "usage: python -m benchmarks.bench_repair" in done.stdout, done.stderr
    # as a package, with no script reaching for its neighbours through sys.path
    assert [p.name for p in (REPO / "benchmarks").glob("*.py") if "sys.path" in p.read_text(encoding="utf-8")] == []


def test_save_writes_a_dated_record_atomically_and_only_when_asked(monkeypatch, tmp_path, distilbert_dir, capsys):
    # --json prints the record; --save writes the same to <dir>/<date>-<benchmark>[-<variant>].json,
    # with the command that reproduces it (less the save options), the machine and the code.
    default_dir = tmp_path / "default"
    monkeypatch.setattr(results, "RESULTS_DIR", default_dir)
    assert head_shape.main([str(distilbert_dir), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert not default_dir.exists()  # nothing written unless asked
    assert printed["command"] == f"python -m benchmarks.head_shape {distilbert_dir} --json"

    out = tmp_path / "out"
    assert head_shape.main([str(distilbert_dir), "--save", "--save-dir", str(out)]) == 0
    assert capsys.readouterr().out.startswith("| head |")  # the table, as without --save
    (path,) = out.iterdir()  # one file, no temporary left beside it
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}-head_shape-models1\.json", path.name)
    assert results.problems_of(path) == []
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["command"] == f"python -m benchmarks.head_shape {distilbert_dir}"
    assert record["result"] == printed["result"] and record["benchmark"] == "head_shape"
    assert record["machine"]["cpu_count"] >= 1 and re.fullmatch(
        r"[0-9a-f]{16}", record["code"]["warp_check_sources_sha256"]
    )
    assert record["code"]["git_commit"] is None or re.fullmatch(r"[0-9a-f]{40}", record["code"]["git_commit"])
    assert "transcribed" not in record

    assert head_shape.main([str(distilbert_dir), "--save", "--variant", "tiny"]) == 0
    assert [p.name for p in default_dir.iterdir()] == [f"{record['date']}-head_shape-tiny.json"]


def test_the_record_names_its_command_and_variant():
    parser = bench_scale.build_parser()
    argv = ["--sizes", "100000", "--rank", "8", "--head", "measured", "--save", "--save-dir", "x", "--json"]
    assert results.variant_of(parser, parser.parse_args(argv)) == "sizes-100000-rank8-head-measured"
    assert results.variant_of(parser, parser.parse_args(["--json"])) == ""
    assert results.command_line("bench_scale", argv + ["--variant=v"]) == (
        "python -m benchmarks.bench_scale --sizes 100000 --rank 8 --head measured --json"
    )
    split = results.split_command("OMP_NUM_THREADS=1 python -m benchmarks.bench_qp --rank 2")
    assert split == ("bench_qp", ["--rank", "2"])
    with pytest.raises(ValueError, match="is not `python -m benchmarks"):
        results.split_command("python benchmarks/bench_qp.py --rank 2")


def test_the_machine_names_the_gpus_torch_sees_without_loading_torch(monkeypatch):
    from benchmarks import measure

    class Cuda:  # what torch.cuda says on a machine with two GPUs
        is_available = staticmethod(lambda: True)
        device_count = staticmethod(lambda: 2)
        get_device_name = staticmethod(lambda i: f"GPU {i}")

    monkeypatch.setitem(sys.modules, "torch", None)  # as if never imported (None: no second import either)
    assert measure.machine_info()["gpus"] == []
    monkeypatch.setitem(sys.modules, "torch", type("torch", (), {"cuda": Cuda}))
    assert measure.machine_info()["gpus"] == ["GPU 0", "GPU 1"]


RESULT_FILES = sorted((REPO / "benchmarks" / "results").glob("*.json"))


def _parses(command: str) -> None:
    name, args = results.split_command(command)
    try:
        importlib.import_module(f"benchmarks.{name}").build_parser().parse_args(args)
    except SystemExit:
        pytest.fail(f"{command!r} does not run as written")


def test_every_result_file_is_a_dated_record_whose_command_runs():
    assert RESULT_FILES
    for path in RESULT_FILES:
        assert results.problems_of(path) == []
        record = json.loads(path.read_text(encoding="utf-8"))
        assert record.get("transcribed") is True or record["code"]["warp_check_sources_sha256"], path.name
        _parses(record["command"])


def test_the_results_document_cites_every_result_file_and_its_commands_run():
    # Every figure in RESULTS.md is backed by a file in benchmarks/results/ (and every file is
    # cited); every full command it or the README's Benchmarks section prints runs as written.
    document = (REPO / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Benchmarks") :]
    section = section[: section.find("\n## ", 1) if "\n## " in section[1:] else len(section)]
    # A topic's own page beside its records (benchmarks/results/<topic>.md) cites them as RESULTS.md does.
    pages = "".join(p.read_text(encoding="utf-8") for p in sorted((REPO / "benchmarks" / "results").glob("*.md")))
    section += pages
    inline = re.findall(r"\]\((?:benchmarks/)?results/([^)]+\.json)\)", document + section)
    inline += re.findall(r"\]\(([^)/]+\.json)\)", pages)
    defined = re.findall(r"^\[[^\]]+\]:\s*(?:benchmarks/)?results/(\S+\.json)", document + section, re.MULTILINE)
    assert set(inline) | set(defined) == {p.name for p in RESULT_FILES}
    commands = re.findall(r"`((?:[A-Z_]+=\S+ )*python -m benchmarks\.[a-z_0-9]+(?: [^`]*)?)`", document + section)
    assert {results.split_command(command)[0] for command in commands} == set(SCRIPTS)
    for command in commands:
        _parses(command)
    # One readable page: one figure a line, each line short enough to read without scrolling.
    for number, line in enumerate(document.splitlines(), start=1):
        assert len(line) <= 200, f"RESULTS.md line {number} is {len(line)} characters (at most 200)"
    assert len(document.encode("utf-8")) <= 50_000


def test_generalise_averages_each_variant_over_its_seeds():
    from benchmarks import generalise

    def row(variant, seed, dev, held, status="converged"):
        figures = dict.fromkeys(generalise.MEANS_OF, 1.0) | {"general_acc": dev, "attack_gen": held}
        return {"variant": variant, "seed": seed, "status": status, **figures, "attack_cross_recipe": None}

    rows = [row("default", 0, 0.70, 0.50), row("default", 1, 0.74, 0.56), row("paper", 0, 0.72, 0.3, "not_converged")]
    default, paper = generalise.seed_means(rows)
    assert default["seeds"] == [0, 1] and default["all_converged"] and not paper["all_converged"]
    assert default["general_acc"] == pytest.approx({"mean": 0.72, "min": 0.70, "max": 0.74})
    assert default["attack_gen"]["mean"] == pytest.approx(0.53) and default["attack_cross_recipe"] is None
    assert paper["attack_gen"] == {"mean": 0.3, "min": 0.3, "max": 0.3}
    assert generalise.build_parser().parse_args(["--seeds", "0,2"]).seeds == [0, 2]
    # Which seeds, in a saved file's name: two runs of other seeds the same day must not share one.
    parser = generalise.build_parser()
    assert results.variant_of(parser, parser.parse_args(["--seeds", "3,4,5"])) == "seeds-3+4+5"
    # Past a file name's length, a digest of the whole tells two such runs apart.
    long = [results.variant_of(parser, parser.parse_args(["--variants", "x" * 120, "--seeds", s])) for s in "12"]
    assert long[0] != long[1] and all(len(name) == 100 and name.startswith("variants-xxx") for name in long)
    with pytest.raises(SystemExit):
        generalise.main(["--seeds", "0,x"])


def test_the_sst2_fine_tune_is_built_once_per_recipe_and_the_rte_one_keeps_its_cache(
    monkeypatch, tmp_path, distilbert_dir
):
    from benchmarks import example_models

    rng = np.random.default_rng(0)
    words = ("good", "fine", "great", "bad", "awful", "dull", "film", "plot", "cast")
    rows = [{"id": f"r{i}", "text": " ".join(rng.choice(words, 6)), "label": int(i % 2)} for i in range(40)]
    monkeypatch.setattr(example_models, "read_tsv", lambda task, split: [dict(r) for r in rows])
    monkeypatch.setattr(example_models, "minilm", lambda name: distilbert_dir)
    monkeypatch.setattr(example_models, "cache_root", lambda: tmp_path)
    logged: list[str] = []
    folder, info = example_models.sst2_finetune("distilbert", 16, logged.append)
    assert folder.parent == tmp_path and folder.name.startswith("sst2-minilm-distilbert-")
    assert info["rows"] == 16 and info["epochs"] == 1 and 0.0 <= info["dev_accuracy"] <= 1.0
    assert len(logged) == 1 and (folder / "config.json").is_file()
    again, info_again = example_models.sst2_finetune("distilbert", 16, logged.append)
    assert (again, info_again) == (folder, info) and len(logged) == 1  # read back, not trained again
    other, _ = example_models.sst2_finetune("distilbert", 24, logged.append)
    assert other != folder and len(logged) == 2
    # The RTE fine-tunes already built keep their folder: its name hashes the recipe as it always did.
    recipe = {"format": "warp-bench-rte/1", "base": distilbert_dir.name, "epochs": 2, "lr": 5e-5, "batch": 16}
    recipe["seed"] = 0
    key = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]
    built = tmp_path / f"rte-minilm-distilbert-{key}"
    built.mkdir()
    (built / "training.json").write_text(json.dumps(recipe | {"dev_accuracy": 0.5}))
    assert example_models.rte_finetune("distilbert", 2, logged.append) == (built, recipe | {"dev_accuracy": 0.5})


def test_generalise_points_the_suite_at_unlabelled_sentences_outside_its_training_and_its_split(
    monkeypatch, tmp_path, distilbert_dir
):
    from testkit.suite_builder import split_cases

    from benchmarks import generalise
    from benchmarks.paper_tables import Split

    wrong, right = split_cases(distilbert_dir, 48, seed=4)
    rows = [{"id": f"train-{i}", "text": c["text"], "label": 0} for i, c in enumerate(right + wrong)]
    # The clean sentences the must_fix and held-out attacks came from are in the split too.
    fix = [dict(wrong[0], original=rows[-1]["id"]), wrong[1]]
    suite_dir = write_suite(tmp_path / "suite", model=distilbert_dir, fix=fix, keep=right[:4])
    heldout = tmp_path / "heldout.jsonl"
    heldout.write_text(json.dumps({"text": right[4]["text"], "label": right[4]["label"], "original": rows[-2]["id"]}))
    trained = rows[5:9]
    monkeypatch.setattr(generalise, "read_tsv", lambda task, split: [dict(r) for r in rows])
    monkeypatch.setattr(generalise, "sst2_training_rows", lambda n: trained[:n])
    split = Split(model_dir=distilbert_dir, suite_dir=suite_dir, general=heldout, heldout=heldout, sizes={}, info={})
    args = generalise.build_parser().parse_args(["--sst2-rows", "4", "--unlabelled", "30"])
    suite = generalise.load_suite(suite_dir)
    adapter = generalise.load_adapter(suite)
    generalise.point_at_unlabelled(split, suite, adapter, args, tmp_path / "unlabelled.jsonl", lambda message: None)
    offered = [json.loads(line)["text"] for line in (tmp_path / "unlabelled.jsonl").read_text().splitlines()]
    taken = {c["text"] for c in wrong[:2] + right[:5]} | {r["text"] for r in trained + rows[-2:]}
    eligible = [r["text"] for r in rows if r["text"] not in taken and len(r["text"].split()) >= 6]
    assert len(offered) == min(30, len(eligible)) and set(offered) <= set(eligible)
    suite = generalise.load_suite(suite_dir)  # the suite lists them: a repair keeps them
    predicted = [c for c in suite.cases if (c.source or "").startswith("prediction:")]
    assert len(predicted) == split.sizes["predicted"] > 0 and {c.text for c in predicted} <= set(offered)
    assert (
        split.sizes["unlabelled"]
        == len(offered)
        == split.sizes["predicted"]
        + split.sizes["predicted_within_gamma_h"]
        + split.sizes["predicted_left_out_as_suite_or_repeat"]
    )
    assert all(c.kind is generalise.Kind.MUST_KEEP for c in predicted)
    with pytest.raises(SystemExit):
        generalise.main(["--task", "rte", "--unlabelled", "10"])


def test_generalise_runs_a_variant_on_the_final_linear_layer_with_v_encoded_there(tiny_suite):
    from benchmarks import generalise

    suite = generalise.load_suite(tiny_suite)
    adapter = generalise.load_adapter(suite)
    assert generalise.at_layer(adapter, "auto") is adapter
    final = generalise.at_layer(adapter, "final")
    assert final.spec.repair_layer == adapter.spec.classifier and final.spec.fallback is None
    # v is the input of the layer repaired: the classifier's is not the dense layer's.
    text = [suite.cases[0]]
    dense_v = generalise.evaluate(adapter, text, progress=False).encoded.V
    final_v = generalise.evaluate(final, text, progress=False).encoded.V
    assert not np.allclose(dense_v, final_v)
    with pytest.raises(ValueError, match="only 'auto' and, for a dense head, 'final'"):
        generalise.at_layer(final, "final")
    assert {v.layer for v in generalise.VARIANTS.values()} == {"auto", "final"}
