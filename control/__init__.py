"""tickformer.control: controllers and simulated plants for closed-loop use of a runtime session.

    reference   reference trajectories to track
    mpc         model-predictive controllers choosing among candidate actions with a model
                (a runtime session) or with the true plant equations
    simulation  a plant advanced one period per control tick, zero-order hold on the action

Used by `tickformer demo`; each controller has `step(obs) -> action`, so it runs under
`tickformer.runtime.ControlLoop`.
"""

from .mpc import ModelMPC, OneStepMPC, TrueMPC
from .reference import SineReference
from .simulation import SimulatedPlant

__all__ = ["ModelMPC", "OneStepMPC", "SimulatedPlant", "SineReference", "TrueMPC"]
