#!/usr/bin/env python3
"""Generate the tiny example's datasets (deterministic; pure python3).

  data/arith.json       ~4000 sharegpt records: "What is 37 + 48?" -> "85"
  data/arith_eval.json  400 held-out records whose (a, op, b) never occur in arith.json

Records use the OpenAI-style sharegpt layout LLaMA-Factory reads with
columns {messages: "messages"} and tags {role: "role", content: "content",
user: "user", assistant: "assistant"}.
Run from anywhere: python3 examples/tiny/make_data.py
"""
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
N_TRAIN, N_EVAL, SEED = 4000, 400, 1234


def all_problems():
    """Every (a, op, b) with two-digit-or-less operands and a non-negative answer."""
    out = []
    for a in range(100):
        for b in range(100):
            out.append((a, "+", b))
            if a >= b:
                out.append((a, "-", b))
    return out


def record(a, op, b):
    answer = a + b if op == "+" else a - b
    return {"messages": [
        {"role": "user", "content": "What is %d %s %d?" % (a, op, b)},
        {"role": "assistant", "content": str(answer)},
    ]}


def write(path, records):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("[\n")
        f.write(",\n".join(json.dumps(r, ensure_ascii=False) for r in records))
        f.write("\n]\n")
    os.replace(tmp, path)


def main():
    rng = random.Random(SEED)
    problems = all_problems()
    rng.shuffle(problems)
    evals, train = problems[:N_EVAL], problems[N_EVAL:N_EVAL + N_TRAIN]
    os.makedirs(os.path.join(HERE, "data"), exist_ok=True)
    write(os.path.join(HERE, "data", "arith.json"), [record(*p) for p in train])
    write(os.path.join(HERE, "data", "arith_eval.json"), [record(*p) for p in evals])


if __name__ == "__main__":
    main()
