"""A guess-the-number env written with OpenEnv's own server (`openenv.core.env_server`), not by
sandgym: the CLI test `run_and_train_on_an_env_written_with_openenvs_python_server` serves it
and plays and trains on it with `--env http://127.0.0.1:PORT`.

Its one tool is an MCP tool (`guess`, 1 to 4); an episode ends on the right guess (reward 1)
or after four guesses. Usage: `python guess_env.py PORT`.
"""

import socket
from typing import Annotated

import uvicorn
from fastmcp import FastMCP
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Observation, State
from pydantic import Field

MAX_GUESSES = 4


class GuessEnv(MCPEnvironment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        mcp = FastMCP("guess")
        self.secret = 1
        self.steps = 0
        self.last = None

        @mcp.tool
        def guess(number: Annotated[int, Field(ge=1, le=4)]) -> str:
            """Guess the secret number (1 to 4)."""
            self.last = number
            if number == self.secret:
                return "correct"
            return "higher" if number < self.secret else "lower"

        super().__init__(mcp)
        self._state = State(episode_id=None, step_count=0)

    def reset(self, seed=None, episode_id=None, **kwargs):
        self.secret = 1 + (seed or 0) % 4
        self.steps = 0
        self._state = State(episode_id=episode_id, step_count=0)
        return Observation(
            done=False, reward=0.0, metadata={"prompt": "Guess a number from 1 to 4."}
        )

    def _step_impl(self, action, timeout_s=None, **kwargs):
        # Actions that are not MCP tool calls.
        return Observation(done=True, reward=0.0, metadata={"error": "only the guess tool"})

    def _score(self, obs):
        self.steps += 1
        self._state.step_count = self.steps
        won = self.last == self.secret
        obs.reward = 1.0 if won else 0.0
        obs.done = won or self.steps >= MAX_GUESSES
        return obs

    # HTTP calls `step`, the WebSocket handler `step_async`: both are scored.
    def step(self, action, timeout_s=None, **kwargs):
        self.last = None
        return self._score(super().step(action, timeout_s=timeout_s, **kwargs))

    async def step_async(self, action, timeout_s=None, **kwargs):
        self.last = None
        return self._score(await super().step_async(action, timeout_s=timeout_s, **kwargs))

    @property
    def state(self):
        return self._state


app = create_app(
    GuessEnv,
    CallToolAction,
    CallToolObservation,
    env_name="guess-python",
    max_concurrent_envs=64,
)

if __name__ == "__main__":
    # The OS picks the port of a socket the server holds from the start (no other process can
    # take it in between); its number is the first line on stdout.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(sock.getsockname()[1], flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
