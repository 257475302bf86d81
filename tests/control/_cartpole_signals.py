"""The signals of a cart-pole forecast artifact (`train --data LOG --inputs command --outputs
x,theta --horizon 3`), as the controllers read them from its manifest: for the test sessions of
test_cartpole_loop.py and test_gear_bank.py."""

SIGNALS = {
    "inputs": [
        {"name": "command", "role": "input"},
        {"name": "x", "role": "output"},
        {"name": "theta", "role": "output"},
    ],
    "outputs": [{}] * 6,  # horizon 3 x 2 outputs
}
