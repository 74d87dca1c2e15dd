#!/usr/bin/env python3
"""Turns Nsight Compute's CSV of the profiled cases into a small JSON (bench/device/profile_kernels.sh).

  python3 bench/device/ncu_summary.py --run CASES.json KERNELS.csv [--run ...] [--timing TIMES.json ...] --out profile.json

CASES.json is the case list a profiled process wrote (`bench_scales --profile --out`, `reshard.py
--profile-out`): cases in launch order, each {"index", "name", "bytes", "copy_kernel_pattern", ...}.
KERNELS.csv is `ncu --import REPORT --csv --page raw --print-units base` of that process (one row per
kernel, a row of units under the header, numbers with thousands separators); the details page (`--csv`
alone: one row per metric, "Metric Name"/"Metric Value" columns) is read too. TIMES.json: case lists of
unprofiled runs, whose "*_ms" fields (CUDA-event timings) are merged by case name.

Kernels are assigned to cases by bench_scales' marker kernel (`profile_case_marker`, grid = case index +
1); without markers (reshard.py) all of a run's kernels belong to its one case. Within a case, the
kernels before the first one whose name contains the case's `copy_kernel_pattern` are the call, that one
is the copy kernel, and those after it are what cudaMemcpyAsync ran as kernels (usually none: a copy
engine). An absent metric (another ncu version, a section not collected) is left out, never guessed.
"""
import argparse
import csv
import io
import json
import re
import sys

MARKER = "profile_case_marker"

# name in the JSON: the ncu metric (base units: bytes, nanoseconds, percent)
METRICS = {
    "duration_us": "gpu__time_duration.sum",
    "dram_read_bytes": "dram__bytes_read.sum",
    "dram_write_bytes": "dram__bytes_write.sum",
    "dram_pct_of_peak": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_pct_of_peak_sol": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "memory_pct_of_peak": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "sm_pct_of_peak": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "l2_pct_of_peak": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
    "warps_active_per_cycle": "sm__warps_active.avg.per_cycle_active",
    "registers_per_thread": "launch__registers_per_thread",
    "waves_per_sm": "launch__waves_per_multiprocessor",
    "grid_size": "launch__grid_size",
    "block_size": "launch__block_size",
    "l2_hit_pct": "lts__t_sector_hit_rate.pct",
    "issue_active_pct": "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "sm_cycles_active_avg": "sm__cycles_active.avg",
    "sm_cycles_active_max": "sm__cycles_active.max",
    "sm_cycles_active_min": "sm__cycles_active.min",
    "sm_cycles_elapsed_avg": "sm__cycles_elapsed.avg",
    "st_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "st_requests": "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "ld_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "ld_requests": "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "local_ld_sectors": "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum",
    "local_st_sectors": "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum",
    "l2_write_sectors": "lts__t_sectors_srcunit_tex_op_write.sum",
    "warp_instructions": "smsp__inst_executed.sum",
    "smem_ld_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "smem_st_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "smem_ld_bank_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "smem_st_bank_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
}
# WarpStateStats: cycles a warp spends stalled for each reason, per instruction issued
STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")
STALL_PCT = re.compile(r"^smsp__pcsamp_warps_issue_stalled_(\w+)$")  # SourceCounters, if collected


def number(text):
    """ncu's printed value as a float (thousands separators dropped), None if not a number."""
    text = (text or "").strip().replace(",", "")
    if not text or text.lower() in ("n/a", "nan"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def read_csv(text):
    """Kernels from ncu's CSV, in the order profiled: [{"id", "name", "metrics": {metric: text}, "units"}]."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header = rows[0]
    col = {name: i for i, name in enumerate(header)}
    kernels, by_id = [], {}
    if "Metric Name" in col and "Metric Value" in col:  # details page: one row per metric
        for row in rows[1:]:
            if len(row) < len(header) or not row[col["ID"]]:
                continue
            kid = row[col["ID"]]
            if kid not in by_id:
                by_id[kid] = {"id": int(kid), "name": row[col["Kernel Name"]], "metrics": {}, "units": {}}
                kernels.append(by_id[kid])
            k = by_id[kid]
            k["metrics"][row[col["Metric Name"]]] = row[col["Metric Value"]]
            k["units"][row[col["Metric Name"]]] = row[col.get("Metric Unit", col["Metric Name"])] if "Metric Unit" in col else ""
            for extra in ("Grid Size", "Block Size"):
                if extra in col:
                    k["metrics"].setdefault(extra, row[col[extra]])
        return kernels
    units = {}
    for row in rows[1:]:  # raw page: one row per kernel, the units under the header
        if len(row) < len(header):
            continue
        if not row[col["ID"]]:
            units = dict(zip(header, row))
            continue
        kernels.append({"id": int(row[col["ID"]]), "name": row[col["Kernel Name"]],
                        "metrics": dict(zip(header, row)), "units": units})
    return kernels


def scaled(kernel, metric):
    """The metric's value in base units (nanoseconds, bytes), whatever unit ncu printed."""
    value = number(kernel["metrics"].get(metric))
    if value is None:
        return None
    unit = (kernel["units"].get(metric) or "").strip().lower()
    factor = {"usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9,
              "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "kb": 1e3, "mb": 1e6, "gb": 1e9}.get(unit, 1)
    return value * factor


def summarize_kernel(kernel):
    """The few figures bench/device/README.md, "Profiles", reads, from one kernel's metrics."""
    out = {"name": kernel["name"][:120]}
    m = {}
    for key, metric in METRICS.items():
        value = scaled(kernel, metric)
        if value is not None:
            m[key] = value
    if "duration_us" in m:
        out["duration_us"] = round(m["duration_us"] / 1e3, 3)
    for key in ("dram_read_bytes", "dram_write_bytes"):
        if key in m:
            out[key.replace("_bytes", "_mb")] = round(m[key] / 1e6, 3)
    if "duration_us" in m and "dram_read_bytes" in m and "dram_write_bytes" in m and m["duration_us"] > 0:
        out["dram_gbps"] = round((m["dram_read_bytes"] + m["dram_write_bytes"]) / m["duration_us"], 1)  # B/ns = GB/s
    dram_pct = m.get("dram_pct_of_peak", m.get("dram_pct_of_peak_sol"))
    if dram_pct is not None:
        out["dram_pct_of_peak"] = round(dram_pct, 1)
    for key in ("memory_pct_of_peak", "sm_pct_of_peak", "l2_pct_of_peak", "achieved_occupancy_pct",
                "theoretical_occupancy_pct", "warps_active_per_cycle", "l2_hit_pct", "issue_active_pct",
                "waves_per_sm"):
        if key in m:
            out[key] = round(m[key], 2)
    for key in ("registers_per_thread", "grid_size", "block_size"):
        if key in m:
            out[key] = int(m[key])
    if "grid_size" not in out and kernel["metrics"].get("Grid Size"):
        out["grid"] = kernel["metrics"]["Grid Size"]
    # SM active fraction: below ~95% the SMs sat idle for part of the kernel (ramp, tail, too few blocks)
    if m.get("sm_cycles_elapsed_avg"):
        if "sm_cycles_active_avg" in m:
            out["sm_active_pct"] = round(100 * m["sm_cycles_active_avg"] / m["sm_cycles_elapsed_avg"], 1)
        if "sm_cycles_active_max" in m and m.get("sm_cycles_active_avg"):
            out["sm_active_max_over_avg"] = round(m["sm_cycles_active_max"] / m["sm_cycles_active_avg"], 3)
        if "sm_cycles_active_min" in m and m.get("sm_cycles_active_avg"):  # an SM that ran out of chunks early
            out["sm_active_min_over_avg"] = round(m["sm_cycles_active_min"] / m["sm_cycles_active_avg"], 3)
    for kind in ("st", "ld"):
        if m.get(f"{kind}_requests"):
            out[f"{kind}_sectors_per_request"] = round(m[f"{kind}_sectors"] / m[f"{kind}_requests"], 2)
    for key in ("l2_write_sectors", "warp_instructions", "smem_ld_wavefronts", "smem_st_wavefronts",
                "smem_ld_bank_conflicts", "smem_st_bank_conflicts"):
        if key in m:
            out[key] = int(m[key])
    spill = m.get("local_ld_sectors", 0) + m.get("local_st_sectors", 0)
    if spill:
        out["local_memory_sectors"] = int(spill)
    # Stall reasons: the per-issue ratios of WarpStateStats; the sampled counts only if those are absent
    # (the two are on different scales). "selected" is issuing, not a stall.
    stalls = {}
    for pattern in (STALL, STALL_PCT):
        for metric, text in kernel["metrics"].items():
            match = pattern.match(metric)
            value = number(text)
            if match and value is not None and match.group(1) != "selected" and not match.group(1).endswith("not_issued"):
                stalls[match.group(1)] = value
        if stalls:
            break
    stalls = list(stalls.items())
    stalls.sort(key=lambda s: -s[1])
    if stalls:
        out["top_stalls"] = [[reason, round(value, 2)] for reason, value in stalls[:3]]
    return out


def assign(kernels, cases):
    """{case index: [kernels]}: by marker kernels, or all to the one case when there are none."""
    markers = [k for k in kernels if MARKER in k["name"]]
    if not markers:
        return ({cases[0]["index"]: kernels} if len(cases) == 1 else {}), []
    warnings = []
    if len(markers) != len(cases):
        warnings.append(f"{len(markers)} marker kernels for {len(cases)} cases: assigned in order")
    groups, current, seen = {}, None, 0
    for k in kernels:
        if MARKER in k["name"]:
            current = cases[seen]["index"] if seen < len(cases) else None
            if current is not None:
                groups[current] = []
                grid = number(k["metrics"].get("launch__grid_size"))
                if grid is not None and int(grid) != current + 1:
                    warnings.append(f"marker {seen}: grid {int(grid)}, expected {current + 1} (case {cases[seen]['name']})")
            seen += 1
            continue
        if current is not None:
            groups[current].append(k)
    return groups, warnings


def summarize_case(case, kernels, timing):
    pattern = case.get("copy_kernel_pattern", "profile_copy_kernel")
    split = next((i for i, k in enumerate(kernels) if pattern in k["name"]), None)
    call = kernels if split is None else kernels[:split]
    copy = None if split is None else kernels[split]
    after = [] if split is None else kernels[split + 1:]
    out = {"bytes": case["bytes"]}
    for key in ("layers", "tensors", "copy_engine_min_bytes"):
        if key in case:
            out[key] = case[key]
    times = {k: v for k, v in {**case, **timing}.items() if k.endswith("_ms")}
    if times:
        out["timing_ms"] = times
        call_ms = times.get("call_gpu_ms") or times.get("call_ms")  # the GPU time alone when measured
        if call_ms and times.get("copy_kernel_ms"):
            out["timing_copy_kernel_over_call"] = round(times["copy_kernel_ms"] / call_ms, 3)
        if call_ms and times.get("memcpy_ms"):
            out["timing_memcpy_over_call"] = round(times["memcpy_ms"] / call_ms, 3)
        if times.get("memcpy_ms") and times.get("copy_kernel_ms"):
            out["timing_memcpy_over_copy_kernel"] = round(times["memcpy_ms"] / times["copy_kernel_ms"], 3)
        if case.get("timed_under_ncu"):
            out["timed_under_ncu"] = True
    summaries = [summarize_kernel(k) for k in call]
    total_us = sum(s.get("duration_us", 0) for s in summaries)
    out["call"] = {"launches": len(call), "duration_us": round(total_us, 3)}
    if total_us:
        out["call"]["gbps"] = round(case["bytes"] / total_us / 1e3, 1)
    for key in ("dram_read_mb", "dram_write_mb"):
        if all(key in s for s in summaries) and summaries:
            out["call"][key] = round(sum(s[key] for s in summaries), 3)
    if "dram_read_mb" in out["call"] and "dram_write_mb" in out["call"]:
        # DRAM bytes over the bytes the case must move: > 1 is over-fetch or partial-sector writes
        out["call"]["dram_bytes_over_needed"] = round(
            (out["call"]["dram_read_mb"] + out["call"]["dram_write_mb"]) * 1e6 / case["bytes"], 3)
    kib = case["bytes"] / 1024
    for key in ("l2_write_sectors", "warp_instructions", "smem_ld_wavefronts", "smem_st_wavefronts"):
        if summaries and all(key in k for k in summaries):  # per KiB moved: comparable across cases
            out["call"][f"{key}_per_kib"] = round(sum(k[key] for k in summaries) / kib, 2)
    out["call"]["kernels"] = summaries
    if copy is not None:
        out["copy_kernel"] = summarize_kernel(copy)
        if total_us and out["copy_kernel"].get("duration_us"):
            out["copy_kernel_over_call"] = round(out["copy_kernel"]["duration_us"] / total_us, 3)
    if after:
        out["memcpy_kernels"] = [summarize_kernel(k) for k in after]
    return out


def summarize(runs, timings):
    """runs: [(cases JSON, CSV text or None, why no CSV)]; timings: case JSONs of unprofiled runs."""
    times = {}
    for t in timings:
        for case in t.get("cases", []):
            times[case["name"]] = {k: v for k, v in case.items() if k.endswith("_ms")}
    result = {"cases": {}, "warnings": []}
    for cases_json, text, why in runs:
        if cases_json.get("gpu"):
            result["gpu"] = cases_json["gpu"]
        cases = cases_json.get("cases", [])
        kernels = read_csv(text) if text else []
        if text is not None and not kernels:
            result["warnings"].append(f"{why or 'a run'}: the CSV holds no kernels")
        groups, warnings = assign(kernels, cases) if kernels else ({}, [])
        result["warnings"] += warnings
        for case in cases:
            if case["index"] in groups:
                result["cases"][case["name"]] = summarize_case(case, groups[case["index"]], times.get(case["name"], {}))
            else:
                entry = {"bytes": case["bytes"], "profile": why or "no kernels profiled for this case"}
                timing = {**{k: v for k, v in case.items() if k.endswith("_ms")}, **times.get(case["name"], {})}
                if timing:
                    entry["timing_ms"] = timing
                result["cases"][case["name"]] = entry
    # cases that were only timed (ncu absent or failed for their run)
    for name, timing in times.items():
        result["cases"].setdefault(name, {"timing_ms": timing, "profile": "not profiled"})
    if not result["warnings"]:
        del result["warnings"]
    return result


def table(result):
    """A few lines for the log: per case, the call against its copy kernel."""
    lines = []
    for name, c in result["cases"].items():
        call = c.get("call", {})
        k0 = (call.get("kernels") or [{}])[0]
        copy = c.get("copy_kernel", {})
        t = c.get("timing_ms", {})
        lines.append(
            f"{name:18} call {call.get('duration_us', '-')} us in {call.get('launches', '-')} launch(es), "
            f"copy kernel {copy.get('duration_us', '-')} us | dram {k0.get('dram_pct_of_peak', '-')}% "
            f"(copy {copy.get('dram_pct_of_peak', '-')}%), occupancy {k0.get('achieved_occupancy_pct', '-')}%, "
            f"waves {k0.get('waves_per_sm', '-')}, SM active {k0.get('sm_active_pct', '-')}%, "
            f"st sectors/req {k0.get('st_sectors_per_request', '-')}, stalls {k0.get('top_stalls', '-')} | "
            f"timed: call {t.get('call_ms', '-')} ms, copy kernel {t.get('copy_kernel_ms', '-')}, "
            f"memcpy {t.get('memcpy_ms', '-')}" + (f" | {c['profile']}" if "profile" in c else ""))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", nargs=2, action="append", default=[], metavar=("CASES_JSON", "CSV"),
                        help="a profiled process's case list and ncu's CSV of it (CSV may be missing)")
    parser.add_argument("--timing", action="append", default=[], help="case list of an unprofiled run (timings)")
    parser.add_argument("--why", action="append", default=[],
                        help="per --run, in order: why its CSV is missing (printed in the JSON)")
    parser.add_argument("--out", help="write the JSON here (default: stdout)")
    args = parser.parse_args()
    runs, missing = [], []
    for i, (cases_path, csv_path) in enumerate(args.run):
        why = args.why[i] if i < len(args.why) else ""
        try:
            with open(cases_path) as f:
                cases_json = json.load(f)
        except (OSError, ValueError) as e:
            missing.append(f"{cases_path}: {why or e}")
            continue
        try:
            with open(csv_path) as f:
                text = f.read()
        except OSError:
            text = None
        runs.append((cases_json, text, why))
    timings = []
    for path in args.timing:
        try:
            with open(path) as f:
                timings.append(json.load(f))
        except (OSError, ValueError) as e:
            print(f"ncu_summary: {path}: {e}", file=sys.stderr)
    result = summarize(runs, timings)
    if missing:  # a profiled process that did not get as far as listing its cases
        result.setdefault("warnings", []).extend(missing)
    text = json.dumps(result, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    print(table(result), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
