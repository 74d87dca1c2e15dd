#!/usr/bin/env python3
"""Checks bench/device/ncu_summary.py on hand-made Nsight Compute CSVs (no GPU, no ncu): the raw page
(`--page raw --csv`: header, a row of units, one row per kernel, numbers with thousands separators) and
the details page (`--csv`: one row per metric). Run by scripts/test.sh; `python3 bench/device/test_ncu_summary.py`.
"""
import csv
import io
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncu_summary  # noqa: E402

FIXED = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
         "Grid Size", "Device", "CC"]
MARKER = "(anonymous namespace)::profile_case_marker()"
CALL = "void mxfp8::cuda::(anonymous namespace)::produce_compact_kernel<Width<32>, 300, 0>(JobBatch<300>, int)"
COPY = "(anonymous namespace)::profile_copy_kernel(const uint4 *, uint4 *, long)"


def kernel(name, grid, duration_ns, read, write, stalls=None, st=(0, 0), **extra):
    m = {"gpu__time_duration.sum": duration_ns, "dram__bytes_read.sum": read, "dram__bytes_write.sum": write,
         "launch__grid_size": grid, "launch__block_size": 256, "launch__registers_per_thread": 64,
         "sm__warps_active.avg.pct_of_peak_sustained_active": 45.5, "launch__waves_per_multiprocessor": 1,
         "dram__throughput.avg.pct_of_peak_sustained_elapsed": 61.25, "lts__t_sector_hit_rate.pct": 12.5,
         "sm__cycles_active.avg": 900, "sm__cycles_elapsed.avg": 1000, "sm__cycles_active.max": 990,
         "sm__cycles_active.min": 450,
         "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": st[0],
         "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": st[1]}
    for reason, value in (stalls or {}).items():
        m[f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio"] = value
    m.update(extra)
    return {"name": name, "grid": grid, "metrics": m}


UNITS = {"gpu__time_duration.sum": "nsecond", "dram__bytes_read.sum": "byte", "dram__bytes_write.sum": "byte"}


def fmt(v):
    """As ncu prints numbers: thousands separators, two decimals for fractions."""
    return f"{v:,.2f}" if isinstance(v, float) else f"{v:,}"


def raw_csv(kernels):
    names = sorted({k for kern in kernels for k in kern["metrics"]})
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(FIXED + names)
    w.writerow([""] * len(FIXED) + [UNITS.get(n, "") for n in names])
    for i, k in enumerate(kernels):
        w.writerow([str(i), "4242", "bench_scales", "127.0.0.1", k["name"], "1", "7", "(256, 1, 1)",
                    f"({k['grid']}, 1, 1)", "0", "9.0"] + [fmt(k["metrics"][n]) if n in k["metrics"] else "" for n in names])
    return "==PROF== Connected to process 4242\n" + out.getvalue()


def details_csv(kernels):
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(FIXED + ["Section Name", "Metric Name", "Metric Unit", "Metric Value"])
    for i, k in enumerate(kernels):
        for n, v in k["metrics"].items():
            unit = {"nsecond": "usecond", "byte": "Mbyte"}.get(UNITS.get(n, ""), "")
            shown = v / 1e3 if unit == "usecond" else v / 1e6 if unit == "Mbyte" else v
            w.writerow([str(i), "4242", "python3", "h", k["name"], "1", "7", "(256, 1, 1)", f"({k['grid']}, 1, 1)", "0",
                        "9.0", "Command line profiler metrics", n, unit, fmt(float(shown))])
    return out.getvalue()


def check(condition, what):
    if not condition:
        raise SystemExit(f"test_ncu_summary: FAILED: {what}")


def main():
    cases = {"gpu": "NVIDIA H200", "cases": [
        {"index": 0, "name": "moe", "bytes": 75_497_472, "sets": 4, "copy_kernel_pattern": "profile_copy_kernel"},
        {"index": 1, "name": "model", "bytes": 4_280_000_000, "sets": 3, "copy_kernel_pattern": "profile_copy_kernel"}]}
    kernels = [
        kernel(MARKER, 1, 1_500, 0, 0),
        kernel(CALL, 528, 39_000, 37_800_000, 40_100_000, {"long_scoreboard": 7.5, "barrier": 3.25, "selected": 9.0,
                                                           "lg_throttle": 1.5, "no_instruction": 0.5}, st=(2_400_000, 100_000),
               **{"lts__t_sectors_srcunit_tex_op_write.sum": 2_359_296, "smsp__inst_executed.sum": 737_280}),
        kernel(COPY, 1056, 24_000, 37_700_000, 37_700_000, {"long_scoreboard": 20.0}, st=(400_000, 100_000)),
        kernel(MARKER, 2, 1_400, 0, 0),
        kernel(CALL, 264, 1_000_000, 2_140_000_000, 2_150_000_000),
        kernel(CALL, 264, 300_000, 140_000_000, 140_000_000),
        kernel(COPY, 1056, 1_000_000, 2_140_000_000, 2_140_000_000),
        kernel("void at::native::memcpy_like_kernel()", 80, 990_000, 2_140_000_000, 2_140_000_000),
    ]
    result = ncu_summary.summarize([(cases, raw_csv(kernels), "")],
                                   [{"cases": [{"name": "moe", "call_ms": 0.058, "call_gpu_ms": 0.0395, "copy_kernel_ms": 0.025,
                                                "memcpy_ms": 0.024}]}])
    moe, model = result["cases"]["moe"], result["cases"]["model"]
    check("warnings" not in result, f"no warnings expected: {result.get('warnings')}")
    check(moe["call"]["launches"] == 1 and moe["call"]["duration_us"] == 39.0, f"moe call: {moe['call']}")
    k = moe["call"]["kernels"][0]
    check(k["st_sectors_per_request"] == 24.0, f"store sectors per request: {k}")
    check(k["top_stalls"] == [["long_scoreboard", 7.5], ["barrier", 3.25], ["lg_throttle", 1.5]], f"stalls: {k}")
    check(k["sm_active_pct"] == 90.0 and k["sm_active_min_over_avg"] == 0.5 and k["dram_pct_of_peak"] in (61.2, 61.3),
          f"pcts: {k}")
    check(k["grid_size"] == 528 and k["registers_per_thread"] == 64, f"launch: {k}")
    check(moe["call"]["l2_write_sectors_per_kib"] == 32.0 and moe["call"]["warp_instructions_per_kib"] == 10.0
          and "smem_ld_wavefronts_per_kib" not in moe["call"], f"per KiB: {moe['call']}")
    check(moe["call"]["dram_read_mb"] == 37.8 and abs(moe["call"]["dram_bytes_over_needed"] - 1.032) < 1e-3,
          f"dram bytes: {moe['call']}")
    check(moe["copy_kernel"]["duration_us"] == 24.0 and moe["copy_kernel_over_call"] == round(24 / 39, 3), f"copy: {moe}")
    check(moe["timing_ms"]["call_ms"] == 0.058 and moe["timing_memcpy_over_call"] == round(0.024 / 0.0395, 3),
          f"timing: {moe}")
    check(model["call"]["launches"] == 2 and model["call"]["duration_us"] == 1300.0, f"model: {model['call']}")
    check(len(model["memcpy_kernels"]) == 1 and "memcpy_like" in model["memcpy_kernels"][0]["name"], f"memcpy: {model}")

    # The details page, no markers (reshard.py): every kernel is the one case's; units other than base.
    shard = {"cases": [{"index": 0, "name": "model_shard", "bytes": 540_000_000, "copy_kernel_pattern": "elementwise_kernel",
                        "call_ms": 0.2, "copy_kernel_ms": 0.15, "memcpy_ms": 0.14, "timed_under_ncu": True}]}
    torch_copy = "void at::native::vectorized_elementwise_kernel<4, AUnaryFunctor<long, long, long, add>>(int, ...)"
    rk = [kernel(CALL, 264, 150_000, 200_000_000, 200_000_000), kernel(CALL, 264, 20_000, 1_000_000, 1_000_000),
          kernel(torch_copy, 2000, 140_000, 270_000_000, 270_000_000)]
    r = ncu_summary.summarize([(shard, details_csv(rk), "")], [])["cases"]["model_shard"]
    check(r["call"]["launches"] == 2 and abs(r["call"]["duration_us"] - 170.0) < 1e-6, f"shard call: {r['call']}")
    check(abs(r["call"]["dram_read_mb"] - 201.0) < 1e-6, f"Mbyte scaled: {r['call']}")
    check("elementwise" in r["copy_kernel"]["name"] and r["timed_under_ncu"], f"shard copy: {r}")

    # ncu absent: the timings alone, and why.
    t = ncu_summary.summarize([], [{"cases": [{"name": "moe", "call_ms": 0.04, "memcpy_ms": 0.024}]}])
    check(t["cases"]["moe"]["profile"] == "not profiled" and t["cases"]["moe"]["timing_ms"]["call_ms"] == 0.04, f"{t}")
    # A run whose CSV has no kernels (counters not readable) says so.
    e = ncu_summary.summarize([(cases, "==ERROR== ERR_NVGPUCTRPERM\n", "ncu cannot read the counters")], [])
    check(e["cases"]["moe"]["profile"] == "ncu cannot read the counters" and e["warnings"], f"{e}")

    # The command line end to end, with a missing CSV for a second run.
    with tempfile.TemporaryDirectory() as d:
        paths = {n: os.path.join(d, n) for n in ("cases.json", "k.csv", "out.json")}
        with open(paths["cases.json"], "w") as f:
            json.dump(cases, f)
        with open(paths["k.csv"], "w") as f:
            f.write(raw_csv(kernels))
        subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "ncu_summary.py"),
                        "--run", paths["cases.json"], paths["k.csv"], "--why", "",
                        "--run", os.path.join(d, "absent.json"), os.path.join(d, "absent.csv"), "--why", "timeout",
                        "--out", paths["out.json"]], check=True, capture_output=True)
        with open(paths["out.json"]) as f:
            out = json.load(f)
        check(out["cases"]["moe"]["call"]["duration_us"] == 39.0 and any("timeout" in w for w in out["warnings"]), f"{out}")
        check(os.path.getsize(paths["out.json"]) < 16_000, "the summary stays small")
    print("test_ncu_summary: OK")


if __name__ == "__main__":
    main()
