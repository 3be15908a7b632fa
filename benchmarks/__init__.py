"""warp-check's benchmarks: run each from the repository root as ``python -m benchmarks.<name>``.

Scripts (each a thin ``main`` with ``--help``; ``--json`` prints the result as a record,
``--save`` also writes it to benchmarks/results/<date>-<name>[-<variant>].json):

* ``bench_qp``: the paper's primal QP against the dual, on one paper-size linearised problem;
* ``bench_repair``: the whole repair loop on the paper-size synthetic problem;
* ``bench_scale``: the repair loop with 1k–100k must_keep cases (synthetic or SST-2);
* ``bench_e2e``: what ``--warp-repair`` and a warm cache cost in a real pytest run;
* ``paper_tables``: the paper's tables on SST-2 and RTE with the MiniLM example models;
* ``head_shape`` / ``attack_shape``: the measured shapes behind the synthetic problem.
* ``ner_wikiann``: a token classifier (MiniLM fine-tuned on WikiANN-en) repaired word by word.

Shared code: ``synthetic`` (the synthetic problem), ``sst2_problem`` (the real one), ``data``
(SST-2/RTE rows, suite files), ``example_models`` (the MiniLM example models, RTE fine-tunes),
``certificates`` (Cert 1/2 recomputed in float64), ``measure`` (machine, code version, BLAS
threads, peak RSS, QP times) and ``results`` (the JSON record, ``--save``).
Figures and the commands behind them: benchmarks/RESULTS.md.
"""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent  # the checkout: example_suites/ and warp_check/ are read from it
