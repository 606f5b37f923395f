"""The OpenAI Agents SDK's tool loop against loop_bench's fake OpenAI server, measured the same way.

    cargo run --release --example loop_bench -- --peer .venv-bench/bin/python
    # or, against a server started with `loop_bench serve`:
    .venv-bench/bin/python examples/peers/agents_sdk_loop.py --base-url http://127.0.0.1:PORT/v1

Install: python3 -m venv .venv-bench && .venv-bench/bin/pip install openai-agents

Client CPU is the process CPU clock (time.process_time, all threads). Turn k runs from the start
of HTTP request k to the start of request k+1 (an httpx request hook marks each start), the last
turn to the end of the call. Two warm-up runs, then medians over --runs runs. Prints one JSON row
per mode, with the same fields as loop_bench.
"""

import argparse
import asyncio
import json
import statistics
import time

import httpx2
from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI


@function_tool
def noop() -> str:
    """Does nothing."""
    return "ok"


def mean_ms(values):
    return sum(values) * 1e3 / len(values)


async def one_call(agent, marks, turns, streaming):
    marks.clear()
    begin = time.process_time()
    if streaming:
        result = Runner.run_streamed(agent, "Go", max_turns=turns + 1)
        async for _event in result.stream_events():
            pass
    else:
        result = await Runner.run(agent, "Go", max_turns=turns + 1)
    end = time.process_time()
    assert result.final_output == "All done.", result.final_output
    assert len(marks) == turns + 1, len(marks)
    points = [begin] + marks[1:] + [end]
    return [b - a for a, b in zip(points, points[1:])]


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    set_tracing_disabled(True)

    marks = []

    async def on_request(_request):
        marks.append(time.process_time())

    http = httpx2.AsyncClient(event_hooks={"request": [on_request]})
    client = AsyncOpenAI(base_url=args.base_url, api_key="sk-bench", http_client=http)
    agent = Agent(
        name="bench",
        instructions="You are a benchmark.",
        tools=[noop],
        model=OpenAIChatCompletionsModel(model="fake-model", openai_client=client),
        model_settings=ModelSettings(),
    )
    turns = args.turns
    for streaming in (False, True):
        per_run = []
        for run in range(args.runs + 2):
            cpu = await one_call(agent, marks, turns, streaming)
            if run >= 2:
                per_run.append(cpu)
        mean = statistics.median(mean_ms(c) for c in per_run)
        first = statistics.median(mean_ms(c[:10]) for c in per_run)
        last = statistics.median(mean_ms(c[turns - 10 : turns]) for c in per_run)
        print(
            json.dumps(
                {
                    "client": "OpenAI Agents SDK (Runner.run%s)" % ("_streamed" if streaming else ""),
                    "mode": "stream" if streaming else "blocking",
                    "runs": args.runs,
                    "tool_turns": turns,
                    "cpu_ms_per_turn_mean": round(mean, 3),
                    "cpu_ms_turns_1_10": round(first, 3),
                    "cpu_ms_turns_last_10": round(last, 3),
                    "growth_last_vs_first": round(last / first, 3),
                },
                sort_keys=True,
            ),
            flush=True,
        )


if __name__ == "__main__":
    asyncio.run(main())
