#!/usr/bin/env python3
"""Read a storprof results tree (bench's run/ and datagen's datagen/
records) the way mlpstorage's report generator reads DLIO's (`mlpstorage
reports reportgen`, which is not on PyPI and could not be run here): walk
RESULTS for run directories holding summary.json or one *_metadata.json under
<type>/<model>/<command>/<YYYYMMDD_HHMMSS>, require the metadata fields its
parser takes as complete (benchmark_type, run_datetime, num_processes,
parameters), and derive benchmark type, command, model and accelerator from
hydra's dlio_config/{config,overrides}.yaml as its DLIO fallback does (train
set: run; only generate_data: datagen); both must agree with the metadata
and, for runs, summary.json. Both a run and a datagen record must be found.

    mlpstorage_results_check.py RESULTS MODEL ACCELERATOR
"""
import json
import os
import re
import sys

import yaml


def main():
    root, model, accel = sys.argv[1:4]
    runs = 0
    seen = set()
    for d, _dirs, files in os.walk(root):
        metas = [f for f in files if f.endswith("_metadata.json")]
        if "summary.json" not in files and not metas:
            continue
        assert len(metas) == 1, f"{d}: {len(metas)} metadata files"
        rel = os.path.relpath(d, root).split(os.sep)
        assert len(rel) == 4 and rel[0] == "training" and rel[2] in ("run", "datagen"), f"{d}: layout {rel}"
        assert re.match(r"^\d{8}_\d{6}", rel[3]), f"{d}: not a datetime directory"
        meta = json.load(open(os.path.join(d, metas[0])))
        for k in ("benchmark_type", "run_datetime", "num_processes", "parameters"):
            assert k in meta, f"{d}: metadata lacks {k}"
        cfg = yaml.safe_load(open(os.path.join(d, "dlio_config", "config.yaml")))["workload"]
        overrides = yaml.safe_load(open(os.path.join(d, "dlio_config", "overrides.yaml")))
        wf = cfg.get("workflow", {})
        command = "run" if wf.get("train") else "datagen" if wf.get("generate_data") else None
        assert command == rel[2] == meta["command"], f"{d}: workflow {wf} vs {rel[2]}"
        chosen = [o for o in overrides if o.startswith("workload=")]
        assert chosen and chosen[0].split("_")[1] == accel, f"{d}: overrides {overrides}"
        assert cfg["model"]["name"] == model == meta["model"] == rel[1]
        assert meta["benchmark_type"] == "training"
        params = {o.split("=", 1)[0][len("++workload."):]: o.split("=", 1)[1]
                  for o in overrides if o.startswith("++workload.")}
        assert params == meta["override_parameters"], f"{d}: {params} vs {meta['override_parameters']}"
        if command == "run":
            summary = json.load(open(os.path.join(d, "summary.json")))
            for k in ("start", "num_accelerators", "metric", "host_memory_GB", "host_cpu_count"):
                assert k in summary, f"{d}: summary.json lacks {k}"
            assert meta["num_processes"] == summary["num_accelerators"]
            assert meta["metrics"] == summary["metric"]
            what = f"AU {summary['metric']['train_au_mean_percentage']:.1f}%"
        else:
            dg = json.load(open(os.path.join(d, "datagen.json")))
            what = f"{dg['num_files_train']} files, size rule {dg['dataset_size_rule']['num_files_train']}"
        seen.add(command)
        runs += 1
        print(f"ok mlpstorage results {d}: training/{model}/{command}, {accel}, {what}")
    assert seen == {"run", "datagen"}, f"found {sorted(seen)} under {root}, want run and datagen"
    assert runs > 0, f"no runs under {root}"


if __name__ == "__main__":
    main()
