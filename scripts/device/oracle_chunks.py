"""How big should the float64 truth's chunks be on this GPU? Times the truth as the runner
calls it (oracles/chunked.py, fused passes) on B1 H8 D128 causal bf16 at each ``--seqlen``
for every combination of the chunk cap (CUDA_MAX_CHUNK_ELEMENTS), the minimum number of
chunks of a masked problem (SKIP_CHUNKS) and its most rows per chunk (MAX_SKIP_ROWS), one
process, best of ``--repeats``. At 64k R18
found the long-K GEMMs (P V, dS K) on small cuBLAS tiles: larger chunks may feed them better,
at the price of more band (a causal walk in n chunks computes (n + 1) / 2n of the square).
``python3 scripts/device/oracle_chunks.py [--seqlen 16384 --seqlen 65536]``"""

import argparse
import json

from difftest.measure.bench import shape_problems, time_oracle
from difftest.oracles import chunked


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seqlen", type=int, action="append")
    ap.add_argument("--caps", default="29,30,31", help="log2 of the chunk caps to try")
    ap.add_argument("--skip-chunks", default="8,16,32")
    ap.add_argument("--max-rows", default=str(chunked.MAX_SKIP_ROWS), help="MAX_SKIP_ROWS values to try")
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    time_oracle(shape_problems([(1, 8, 4096, 128)], ("bfloat16",), True, 1)[0], "cuda")  # warm-up
    for s in a.seqlen or [16384, 65536]:
        p = shape_problems([(1, 8, s, 128)], ("bfloat16",), True, 1)[0]
        for cap in (int(x) for x in a.caps.split(",")):
            for n in (int(x) for x in a.skip_chunks.split(",")):
                for rows in (int(x) for x in a.max_rows.split(",")):
                    chunked.CUDA_MAX_CHUNK_ELEMENTS, chunked.SKIP_CHUNKS, chunked.MAX_SKIP_ROWS = 2**cap, n, rows
                    r = time_oracle(p, "cuda", a.repeats)
                    print(json.dumps({"seqlen": s, "cap_log2": cap, "skip_chunks": n, "max_rows": rows,
                                      "seconds": r.get("seconds"), "chunks": r.get("chunks"),
                                      "peak_gib": r.get("peak_gib"), "status": r["status"]}), flush=True)


if __name__ == "__main__":
    main()
