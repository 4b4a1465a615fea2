"""Translate (and verify) every workload type: pass rates per dtype and translation time.

    .venv/bin/python benchmarks/translate.py [--dtypes f32,f16,f64] [--only NAME,...] [--no-verify]
        [--shapes test|default] [--json OUT]

Translation time is measured per program after a warm-up export (torch.export's first call
pays ~2 s of one-time set-up); verification uses ``lowering`` on llvm, 3 trials each.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtypes", default="f32")
    ap.add_argument("--only", default="")
    ap.add_argument("--no-verify", action="store_true")
    ap.add_argument("--shapes", choices=("test", "default"), default="test")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()

    t0 = time.perf_counter()
    import torch  # noqa: F401

    from dataset.translate import translate
    from dataset.translate.verify import verify_translation
    from dataset.workloads import instantiate, registry
    from engine.leir.diagnostics import LeirError
    t_import = time.perf_counter() - t0

    reg = registry()
    names = [n for n in reg if not args.only or n in args.only.split(",")]
    # warm-up: torch.export's first call sets up its tracing machinery
    w0 = reg[names[0]]
    inst = instantiate(w0, w0.test_shapes, "f32")
    translate(inst.model, inst.inputs(0), w0.name)

    rows, times = [], []
    for dt in args.dtypes.split(","):
        for name in names:
            w = reg[name]
            inst = instantiate(w, w.test_shapes if args.shapes == "test" else w.shapes, dt)
            row = {"name": name, "category": w.category, "dtype": dt}
            t = time.perf_counter()
            try:
                tr = translate(inst.model, inst.inputs(0), name)
            except LeirError as e:
                row.update(translated=False, error=e.message.splitlines()[0])
                rows.append(row)
                print(f"FAIL translate {dt} {name}: {row['error']}", flush=True)
                continue
            row["translate_s"] = time.perf_counter() - t
            times.append(row["translate_s"])
            row.update(translated=True, statements=len(tr.program.body))
            if not args.no_verify:
                try:
                    res = verify_translation(tr, inst.model, inst.inputs, args.trials)
                except Exception as e:  # noqa: BLE001 - a benchmark row, not a crash
                    res = {"equal": False, "max_abs_err": None, "max_rel_err": None,
                           "error": {"stage": "reference", "message": str(e).splitlines()[0]}}
                row.update(equal=res["equal"], max_abs_err=res["max_abs_err"], max_rel_err=res["max_rel_err"],
                           error=res["error"])
                if not res["equal"]:
                    print(f"NOT EQUAL {dt} {name}: {res['error'] or res['trials']}", flush=True)
            rows.append(row)
    summary = {"import_s": round(t_import, 2), "types": len(names)}
    for dt in args.dtypes.split(","):
        rs = [r for r in rows if r["dtype"] == dt]
        ok_t = sum(r["translated"] for r in rs)
        summary[dt] = {"translated": ok_t, "of": len(rs)}
        if not args.no_verify:
            summary[dt]["equal"] = sum(bool(r.get("equal")) for r in rs)
    if times:
        summary["translate_s"] = {"median": round(statistics.median(times), 4), "max": round(max(times), 4),
                                  "mean": round(statistics.mean(times), 4)}
    print(json.dumps(summary, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
