"""A plain BrowserGym loop with guimem memory: recall before each step, learn after each episode."""
import browsergym.miniwob  # noqa: F401  (registers browsergym/miniwob.*)
import gymnasium as gym

from guimem.integrations.browsergym import BrowserGymMemory, prepare


def agent(obs: dict, hint: str) -> str:  # your agent: put `hint` in its prompt (this one clicks the named button)
    for node in obs["axtree_object"]["nodes"]:
        if node["role"]["value"] == "button" and node.get("name", {}).get("value") in obs["goal"][:-1].split():
            return f"click({node['browsergym_id']!r})"
    return "noop()"


prepare()  # Playwright runs Debian's chromium; MiniWoB++ pages come from the miniwob package
env = gym.make("browsergym/miniwob.click-test-2")
with BrowserGymMemory.open("stack", "bgym-memory.sqlite") as memory:
    for seed in range(3):
        obs, info = env.reset(seed=seed)
        memory.start("miniwob.click-test-2", obs, seed)
        for _ in range(5):
            action = agent(obs, memory.recall(obs).text)
            memory.record(action)
            obs, reward, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        print(f"seed {seed}: reward {reward}, learned {memory.finish(reward, obs)}")
        memory.end_round()
env.close()
