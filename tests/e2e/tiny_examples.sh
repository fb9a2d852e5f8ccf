# tests/e2e/tiny_examples.sh — sourced (after ROOT is set) by the tests that run
# the tiny example's plans on the local Slurm: tiny_examples DIR makes
# DIR/examples/tiny as those plans name it, the tokenizer linked (only read) and
# the data copied, since prepare writes FILE.stats.json beside each dataset and
# a test must not change the repository's tracked copies.
tiny_examples() {
    mkdir -p "$1/examples/tiny/data" && ln -sfn "$ROOT/examples/tiny/tokenizer" "$1/examples/tiny/tokenizer" &&
        cp "$ROOT"/examples/tiny/data/*.json "$1/examples/tiny/data/"
}
