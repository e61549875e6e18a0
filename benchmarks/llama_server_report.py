"""The tables ``python -m benchmarks.llama_server`` prints: the adapter against llama-server on new prompts,
repeated states and shared states, where the adapter's time goes, and the concurrency table."""

from __future__ import annotations

from benchmarks import concurrency


def _ratio(a, b) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "-"


def _ms(v) -> str:
    return "-" if v is None else f"{v:.1f} ms"


def report(f: dict) -> str:
    m, new, warm, b = f["machine"], f["new_prompts"], f["repeated"], f["breakdown_p50_ms"]
    lines = [
        f"Adapter vs llama-server: {f['model']}, {m['threads']} threads, context {m['context']}, {f['tasks']} "
        f"tasks, alternating; {m['cpu']}, {m['cores']} cores; llama-server {m['llama_server_build']}; "
        f"load average {' -> '.join(str(v) for v in m.get('load_average_1min') or [])}",
        "",
        "p50 client latency                         adapter        llama-server   adapter / llama-server",
        f"  new prompts (cache off)                  {_ms(new['adapter']['p50']):>12}   "
        f"{_ms(new['llama']['p50']):>12}   {_ratio(new['adapter']['p50'], new['llama']['p50'])}",
        f"  new prompts (state cache on)             {_ms(new['adapter_cache']['p50']):>12}",
        f"  repeated states (cache on / warm cache)  {_ms(warm['adapter_cache']['p50']):>12}   "
        f"{_ms(warm['llama']['p50']):>12}   {_ratio(warm['adapter_cache']['p50'], warm['llama']['p50'])}",
        f"  repeated states, adapter cache off       {_ms(warm['adapter']['p50']):>12}",
        f"  new prompts, flash attention auto        {_ms(new['adapter_flash_attn']['p50']):>12}   "
        f"{_ms(new['llama_default']['p50']):>12}   "
        f"{_ratio(new['adapter_flash_attn']['p50'], new['llama_default']['p50'])}",
        "  (the rows above run without flash attention on both sides; the last, as each is deployed with it)",
        "",
        f"letter probabilities from llama-server (top {f['top_logprobs']}): all options present in "
        f"{f['letters']['valid']}/{f['tasks']} tasks; top option as the adapter's in "
        f"{f['letters']['agree']}/{f['letters']['valid']} of those",
        "",
        "shared state (~400-token state): one adapter request vs k separate llama-server requests",
    ]
    for row in f["shared_state"]:
        lines.append(
            f"  k={row['k']}: {_ms(row['adapter_one_request_ms']):>10} vs {_ms(row['llama_k_requests_ms']):>10}"
            f"  ({_ratio(row['adapter_one_request_ms'], row['llama_k_requests_ms'])}); with flash attention "
            f"{_ms(row['adapter_flash_attn_one_request_ms'])} vs {_ms(row['llama_default_k_requests_ms'])}  "
            f"({_ratio(row['adapter_flash_attn_one_request_ms'], row['llama_default_k_requests_ms'])})"
        )
    local = f["in_process"]
    lines += [
        "",
        "where the time goes on new prompts (p50)",
        f"  adapter: HTTP stack (client, nginx, gunicorn, response JSON)  {_ms(b['client_minus_server'])}",
        f"           request handling (parse, validate, render, readout)  {_ms(b['handling'])}"
        f" (readout alone {_ms(local['readout_ms_p50'])})",
        f"           tokenizing in Python                                 {_ms(b['tokenize'])}",
        f"           evaluation                                           {_ms(b['evaluate'])} for "
        f"{b['adapter_tokens']:.0f} prompt tokens read, {local['tokens_evaluated_p50']:.0f} evaluated "
        f"(the fixed head is kept), {local['decode_calls_p50']:.0f} llama_decode call(s)",
        f"  llama-server: prompt evaluation                               {_ms(b['llama_prompt_ms'])} for "
        f"{b['llama_prompt_n']:.0f} tokens evaluated (its cache keeps the common prefix)",
        f"                everything else (HTTP, JSON, sampling 1 token)  {_ms(b['llama_client_minus_prompt'])}",
        f"  in-process engine.decide, no HTTP                             {_ms(local['in_process_decide_ms_p50'])}",
    ]
    if f.get("concurrency"):
        lines += ["", *concurrency.report(f["concurrency"])]
    return "\n".join(lines)


def report_concurrency(f: dict) -> str:
    """The table alone (``--concurrency-only``), under the machine it ran on."""
    m = f["machine"]
    return "\n".join(
        [
            f"Adapter vs llama-server under concurrency: {f['model']}; {m['cpu']}, {m['cores']} cores; "
            f"llama-server {m['llama_server_build']}; load average "
            f"{' -> '.join(str(v) for v in m.get('load_average_1min') or [])}",
            "",
            *concurrency.report(f["concurrency"]),
        ]
    )
