"""RTT throughput against a local https stand-in for Google Translate that answers after 50 ms.

Runs `run_rtt` (googletrans backend, default concurrency and rate limit) on N sentences for one pivot,
then the same job again on the same cache, and prints JSON: round-trip sentences per second, requests
per run (the second must be 0), and the same first run without packing (one sentence per request),
side by side.

    PYTHONPATH=. python scripts/bench_rtt.py --sentences 2000
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.05, help="stub answer delay in seconds")
    parser.add_argument("--corpus", default=str(Path(__file__).resolve().parents[2] / "shared/data/wiki12k.txt"))
    parser.add_argument("--skip-unpacked", action="store_true", help="skip the one-sentence-per-request comparison")
    args = parser.parse_args()

    from jtcse.defaults import default_corpus_sentences
    from jtcse.rtt.cache import TranslationCache
    from jtcse.rtt.googletrans_backend import GoogletransTranslator
    from jtcse.rtt.runner import run_rtt
    from jtcse.testing.translate_stub import StubTranslateServer, make_self_signed_cert

    if Path(args.corpus).is_file():
        lines = [s.strip() for s in Path(args.corpus).read_text("utf-8").splitlines() if s.strip()]
        source = args.corpus
    else:
        lines, source = default_corpus_sentences(), "embedded default corpus"
    sentences = list(dict.fromkeys(lines))[: args.sentences]

    work = Path(tempfile.mkdtemp(prefix="bench_rtt_"))
    cert, key = make_self_signed_cert(work)
    defaults = GoogletransTranslator()
    result: dict = {
        "sentences": len(sentences),
        "corpus": source,
        "stub_latency_s": args.latency,
        "defaults": {
            "concurrency": defaults.concurrency,
            "rate_limit_per_s": defaults.rate_limit,
            "pack_size": defaults.pack_size,
        },
    }

    def one_run(cache_path: Path, out: Path, **kwargs) -> dict:
        with StubTranslateServer(cert, key, latency=args.latency) as server, TranslationCache(cache_path) as cache:
            backend = GoogletransTranslator(server.service_url, ca_bundle=cert, **kwargs)
            start = time.perf_counter()
            with backend:
                summary = run_rtt(sentences, ["de"], backend, out, cache=cache, progress=False)
            seconds = time.perf_counter() - start
            return {
                "seconds": round(seconds, 3),
                "round_trips_per_s": round(len(sentences) / seconds, 1),
                "requests": len(server.translation_requests()),
                "peak_in_flight": server.peak_in_flight,
                "kept": summary.pivots[0].kept,
            }

    result["packed_first_run"] = one_run(work / "a.sqlite", work / "a")
    result["packed_second_run"] = one_run(work / "a.sqlite", work / "a2")
    if not args.skip_unpacked:
        result["unpacked_first_run"] = one_run(work / "b.sqlite", work / "b", pack_size=1)
        result["speedup_packed_vs_unpacked"] = round(
            result["packed_first_run"]["round_trips_per_s"] / result["unpacked_first_run"]["round_trips_per_s"], 2
        )
    result["target_met"] = (
        result["packed_first_run"]["round_trips_per_s"] >= 200 and result["packed_second_run"]["requests"] == 0
    )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
