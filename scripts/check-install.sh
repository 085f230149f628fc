#!/usr/bin/env bash
# Checks an installed `tilth` (the path given, e.g. what `make install` linked): it reports its version and
# runs a one-task scripted session in a throwaway repository, started from inside it without --repo.
set -euo pipefail
tilth="$1"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
"$tilth" --version
git init -q "$scratch/repo"
git -C "$scratch/repo" -c user.name=ci -c user.email=ci@example.invalid commit -q --allow-empty -m init
cat > "$scratch/prd.json" <<'PLAN'
[{"id": "T-1", "title": "Say hello", "description": "Add hello.txt.", "acceptance_criteria": ["hello.txt exists"]}]
PLAN
cat > "$scratch/scenario.json" <<'SCENARIO'
{"tasks": {"T-1": [{"write": {"hello.txt": "hello\n"}}]}}
SCENARIO
(cd "$scratch/repo" && TILTH_HOME="$scratch/home" "$tilth" start --prd "$scratch/prd.json" --backend scripted \
    --scenario "$scratch/scenario.json" --foreground --id install-check)
test "$(git -C "$scratch/repo" show session/install-check:hello.txt)" = hello
echo "check-install: $tilth works"
