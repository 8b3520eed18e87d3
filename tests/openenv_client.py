"""OpenEnv's own client against a served env: `python openenv_client.py URL sql|support`.

Checks /health, /metadata, /schema, a 422 on an unknown tool, what `openenv validate URL`
checks of a running server, then plays one episode over /ws with the generic sync client and
prints what it saw as JSON. Used by tests/cli/openenv.rs and scripts/image-check.sh.
"""
import json, re, sys, requests
from openenv.core.generic_client import GenericEnvClient
url, kind = sys.argv[1], sys.argv[2]
assert requests.get(url + "/health").json() == {"status": "healthy"}
meta = requests.get(url + "/metadata").json()
schema = requests.get(url + "/schema").json()
assert set(schema) == {"action", "observation", "state"}
tools = [b["title"] for b in schema["action"]["oneOf"]]
bad = requests.post(url + "/step", json={"action": {"tool_name": "no_such_tool"}})
assert bad.status_code == 422, bad.text
out = {"name": meta["name"], "tools": tools}
# What `openenv validate URL` checks of a running server.
from openenv.cli._validation import validate_running_environment
report = validate_running_environment(url)
assert report["passed"] and report["mode"] == "simulation", json.dumps(report)
out["validated"] = report["summary"]["passed_count"]
with GenericEnvClient(base_url=url).sync() as env:
    first = env.reset(seed=3, split="test", episode_id="py-1")
    assert not first.done and first.reward is None
    assert first.observation["content"], first.observation
    try:
        env.step({"tool_name": "no_such_tool"})
        raise AssertionError("an unknown tool was accepted")
    except RuntimeError as e:
        assert "VALIDATION_ERROR" in str(e), e
    if kind == "sql":
        listed = env.step({"tool_name": "list_tables", "parameters": {}})
        table = re.findall(r"\b[a-z_]+\b", listed.observation["content"])[0]
        query = "SELECT COUNT(*) FROM " + table
        ran = env.step({"action": {"tool_name": "run_sql", "parameters": {"query": query}}})
        assert not ran.done, ran
        last = env.step({"thought": "count them", "response": query})
        assert last.done, last
    else:
        found = env.step({"type": "call_tool", "tool_name": "search_kb", "arguments": {"query": "returns"}})
        assert not found.done, found
        last = env.step({"tool_name": "reply_to_customer", "parameters": {"message": "Could you give me your order number and e-mail?"}})
    assert isinstance(last.reward, float), last
    record = last.observation["record"]
    assert record["instruction"] == first.observation["content"]
    state = env.state()
    assert state["step_count"] == 3 if kind == "sql" else 2, state
    assert state["episode_id"] == "py-1", state
    out["reward"] = last.reward
    out["done"] = last.done
print(json.dumps(out))
