"""tickformer.control: controllers and simulated plants for closed-loop use of a runtime session.

    reference   reference trajectories to track
    delayed     the hidden pendulum (noisy angle, unknown constants, actuator delay) in the loop,
                and MPC over K candidate commands with a learned model over the shared history
                (Session.peek / commit), nominal physics or the true plant (oracle)
    demo        the history-control demo as library code: its configuration, the training and
                export of its two models, the four closed loops, their verdict and plots
                (imported on use: `from tickformer.control import demo`)

Used by `tickformer demo`; each controller has `step(obs) -> action`, so it runs under
`tickformer.runtime.ControlLoop`.
"""

from .delayed import DelayedMPC, HiddenPlantSim, HistoryMPC, IdentifiedMPC, NominalMPC, OracleMPC
from .reference import SineReference

__all__ = [
    "DelayedMPC",
    "HiddenPlantSim",
    "HistoryMPC",
    "IdentifiedMPC",
    "NominalMPC",
    "OracleMPC",
    "SineReference",
]
