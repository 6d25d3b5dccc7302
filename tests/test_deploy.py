"""How each policy deploys (tierkit.deploy): the registry's word, the labels results show, and
the command that applies a policy."""
import pytest

from tierkit import deploy


def test_every_registered_policy_has_a_label():
    import tierkit

    for _, p in tierkit.policies().iterrows():
        assert deploy.how(p["name"]) in deploy.LABELS
        assert deploy.deployable(p["name"]) == (p["deploy"]["how"] in deploy.DEPLOYABLE)


@pytest.mark.parametrize("policy,ok", [("history:period=10K", True), ("first-touch", True), ("damon-tiering", True),
                                       ("guided:strategy=hotset", True), ("mempod", False), ("otf", False),
                                       ("oracle", False), ("kleio", False), ("tpp", False)])
def test_deployable_follows_the_registry(policy, ok):
    assert deploy.deployable(policy) is ok
    assert (deploy.command(policy) is None) is (not ok)
    if not ok:
        assert deploy.why(policy)


def test_a_run_that_used_future_knowledge_is_not_deployable():
    r = {"policy": "history", "config": {"models": {"future_knowledge": True}}}
    assert not deploy.deployable("history", r)
    assert deploy.label("history", r) == deploy.LABELS["future_knowledge"]
    assert deploy.uses_future({"policy": "oracle", "config": {}})
    assert not deploy.uses_future({"policy": "history", "config": {"models": {"future_knowledge": False}}})


def test_the_command_carries_the_spec_and_the_fast_capacity():
    r = {"policy": "history:period=10K", "trace": "t.tkt", "fast_capacity_pages": 4608, "config": {"page_size": 4096}}
    assert deploy.command("history:period=10K", r, program="./a.out") == \
        "tierkit run --policy history:period=10K --fast-capacity 18M -- ./a.out"
    g = {"policy": "guided:strategy=hotset", "trace": "w.tkt", "fast_capacity_pages": 100,
         "config": {"page_size": 4096, "platform": {"capacity": [{"fraction": 0.125}, "unlimited"]}}}
    c = deploy.command("guided:strategy=hotset", g)
    assert c.startswith("tierkit profile w.tkt -o profile.json && tierkit guide profile.json -s hotset -c 0.125 -o guidance.json")
    assert c.endswith("tierkit run --guidance guidance.json --fast-capacity 400K -- PROGRAM")


def test_a_history_period_in_accesses_becomes_the_time_it_spanned(zipf_trace):
    import tierkit

    r = tierkit.run(zipf_trace, "dram-pmem", "history:period=10K", fast_capacity=0.2)
    per_access = r["runtime_ns"] / r["accesses"]
    spec = deploy.live_spec("history:period=10K", r)
    ns = deploy.time_ns(spec.split("period=")[1])
    assert spec.startswith("history:period=") and ns == pytest.approx(10_000 * per_access, rel=5e-3)
    # the default period (1000 accesses) too, and the other arguments are kept
    assert deploy.live_spec("history:bins=4", r).startswith("history:bins=4,period=")
    # a time is kept as it is, as is every other policy
    assert deploy.live_spec("history:period=100ms", r) == "history:period=100ms"
    assert deploy.live_spec("nimble:period=1s", r) == "nimble:period=1s"
    assert "--policy history:period=" in deploy.command("history:period=10K", r) and "10K" not in deploy.command("history:period=10K", r)


def test_a_memory_policy_with_parameters_is_simulation_only():
    # tierkit run sets interleave at exec with equal weights; weights are not taken live
    assert deploy.deployable("interleave") and not deploy.deployable("interleave:weights=1/3")
    assert "equal weights" in deploy.why("interleave:weights=1/3")
    assert deploy.label("interleave:weights=1/3") == deploy.LABELS["not_live"]
    assert deploy.command("interleave:weights=1/3") is None
