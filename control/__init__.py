"""tickformer.control: controllers and simulated plants for closed-loop use of a runtime session.

    reference   reference trajectories to track
    mpc         model-predictive controllers choosing among candidate actions with a model
                (a runtime session) or with the true plant equations
    simulation  a plant advanced one period per control tick, zero-order hold on the action
    delayed     the hidden pendulum (noisy angle, unknown constants, actuator delay) in the loop,
                and MPC over K candidate commands with a learned model over the shared history
                (Session.peek / commit), nominal physics or the true plant (oracle)
    demo        the history-control demo as library code: its configuration, the training and
                export of its two models, the four closed loops, their verdict and plots
                (imported on use: `from tickformer.control import demo`)

Used by `tickformer demo`; each controller has `step(obs) -> action`, so it runs under
`tickformer.runtime.ControlLoop`.
"""

from .delayed import DelayedMPC, HiddenPlantSim, HistoryMPC, NominalMPC, OracleMPC
from .mpc import ModelMPC, OneStepMPC, TrueMPC
from .reference import SineReference
from .simulation import SimulatedPlant

__all__ = [
    "DelayedMPC",
    "HiddenPlantSim",
    "HistoryMPC",
    "ModelMPC",
    "NominalMPC",
    "OneStepMPC",
    "OracleMPC",
    "SimulatedPlant",
    "SineReference",
    "TrueMPC",
]
