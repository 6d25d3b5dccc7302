"""The Python readers' fuzz targets (fuzz/python/targets.py) in `make test`: each target on its
seed inputs and on a fixed set of mutations of them (the campaign's byte- and
structure-level mutators, seeded by hypothesis, derandomized), asserting the contract: the
CLI exits 0 or 2 with one line of at most 480 characters, an API reader returns or raises a
one-line TierkitError, nothing is written outside the target's folder, and a sweep's table
only holds what its runs give. `make fuzz` runs the same targets coverage-guided under atheris.

TIERKIT_FUZZ_EXAMPLES=N TIERKIT_FUZZ_SEED=random runs more, randomized examples."""
import json
import os
import random
import sys
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz" / "python"))
import campaign  # noqa: E402
import targets  # noqa: E402

SCALE = int(os.environ.get("TIERKIT_FUZZ_EXAMPLES", "0")) / 25 or 1
FUZZ = settings(derandomize=os.environ.get("TIERKIT_FUZZ_SEED") != "random", database=None, deadline=None,
                max_examples=int(25 * SCALE), suppress_health_check=list(HealthCheck))


def mutated(name: str, seed: int) -> bytes:
    rng = random.Random(seed)
    inputs = targets.seed_inputs(name)
    data = inputs[rng.randrange(len(inputs))]
    if name == "store":
        head, data = data[:1], data[1:]
    if rng.random() < 0.6:
        try:
            doc = json.loads(data)
            special = campaign._result_special if name == "result" else None
            data = campaign._dumps(campaign.mutate_json_doc(doc, rng, str(targets.scratch().outside), special), rng)
        except ValueError:
            data = campaign.mutate_bytes(data, rng)
    else:
        data = campaign.mutate_bytes(data, rng)
    return head + data if name == "store" else data


@pytest.mark.parametrize("name", sorted(targets.TARGETS))
def test_seeds_keep_the_contract(name):
    for data in targets.seed_inputs(name):
        targets.TARGETS[name](data)


@pytest.mark.parametrize("name", sorted(targets.TARGETS))
def test_mutations_keep_the_contract(name):
    @FUZZ
    @given(st.integers(0, 2 ** 32))
    def one(seed):
        targets.TARGETS[name](mutated(name, seed))

    one()
