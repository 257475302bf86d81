"""`tickformer log PLANT --out FILE.csv|FILE.parquet [--runs N] [--rows N] [--seed S]
[--policy tuned|nominal|ART] [--extend LOG]`: log a simulated plant under an exploration policy to
a file `tickformer train --data` reads.

    tanks     two cascaded tanks fed by a pump (tickformer.control.tanks): square-root outflow, a
              pump dead zone and saturation; columns time [s], run, pump [V], level1 [cm], level2 [cm]
    cartpole  MuJoCo's inverted pendulum (gymnasium InvertedPendulum-v5, tickformer.control.cartpole)
              with each run's pole mass, hinge damping and actuator gear drawn from the training
              bands, positions measured with noise, the command 2 ticks late; columns time [s],
              run, command, x [m], theta [rad]. --policy: `tuned` (default) balances each run with
              the rig's own LQG (designed on its true physics) plus a white perturbation (std 0.8);
              `nominal` with the nominal LQG (it falls over and over on the low-gear band);
              an artifact ART (a model trained on an earlier log, exported with --batch 17)
              balances it with the learned controller (tickformer.control.cartpole_loop
              ModelFilterMPC) plus a white perturbation (std 0.3): data from the loop's own regime.
              A fall ends a segment (`run` counts segments). --extend LOG: the file holds LOG's
              rows first, then the new runs (their run ids after LOG's)
    gym:ID    any gymnasium environment (tickformer.control.gym_plant): gym:Pendulum-v1, or the
              project's own hidden pendulum gym:tickformer/HiddenPendulum-v0; continuous Box
              spaces. --runs episodes of --rows ticks under uniform random actions within the
              action bounds, each held 1..8 ticks; an episode the env ends is reset and goes on as
              a new run. Columns time [s], run, act0.., obs0..; train with --inputs act0
              --outputs obs0,obs1,.. --episode run --time time. A simulator of your own: register
              it with gymnasium (gymnasium.register) and log gym:YOUR-ID

The file is written atomically (a reader never sees half of it). docs/your_data.md walks from
such a log to a trained, exported, verified and certified model.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tickformer.commands import args as shared

PLANTS = ("tanks", "cartpole", "gym:ID")
COLUMNS = ("time [s]", "run", "command", "x [m]", "theta [rad]")  # the cartpole log's


HELP = "log a simulated plant under random excitation to a CSV or Parquet file (for train --data)"


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("plant", help=f"the plant: {', '.join(PLANTS)}")
    shared.out(p, metavar="FILE", help="the file to write: .csv or .parquet")
    p.add_argument("--runs", type=int, default=5, help="runs (episodes) to log (default 5)")
    p.add_argument("--rows", type=int, default=2000, help="samples per run (default 2000)")
    shared.seed(p, help="seed of the runs' start levels and excitation")
    p.add_argument(
        "--policy",
        default="tuned",
        metavar="tuned|nominal|ART",
        help="cartpole: who balances the runs (default tuned; an artifact: the learned controller)",
    )
    p.add_argument(
        "--extend", default=None, metavar="LOG", help="cartpole: a log whose rows come first in --out"
    )


def _read_log(path: Path, columns: tuple[str, ...]) -> dict:
    """The columns of an earlier cartpole log (.csv or .parquet), by their names."""
    from tickformer.errors import ConfigError, DataError

    suffix = path.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise ConfigError(f"--extend {path}: give the .csv or .parquet log an earlier tickformer log wrote")
    if not path.is_file():
        raise ConfigError(f"--extend {path}: no such file; give a log tickformer log cartpole wrote")
    try:
        if suffix == ".csv":
            import pyarrow.csv as pacsv

            table = pacsv.read_csv(path)
        else:
            import pyarrow.parquet as pq

            table = pq.read_table(path)
    except Exception as exc:  # pyarrow's own errors: not a readable table
        raise DataError(
            f"--extend {path}: not a readable {suffix[1:]} table ({str(exc).splitlines()[0]})"
        ) from None
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise DataError(
            f"--extend {path}: no column(s) {missing}; give a log tickformer log cartpole wrote "
            f"(columns {list(columns)})"
        )
    return {c: table.column(c).to_numpy() for c in columns}


def _cartpole(args: argparse.Namespace) -> dict:
    import numpy as np

    from tickformer.control import cartpole

    base = None
    if args.extend is not None:
        base = _read_log(Path(args.extend), COLUMNS)
    first = int(base["run"].max()) + 1 if base is not None and base["run"].size else 0
    if args.policy in cartpole.LOG_POLICIES:
        columns = cartpole.log_runs(runs=args.runs, rows=args.rows, seed=args.seed, policy=args.policy)
        columns["run"] = columns["run"] + first
    else:
        from tickformer import runtime
        from tickformer.control.cartpole_loop import relog_runs

        with runtime.load(args.policy, backend="ort", threads=1) as session:
            columns = relog_runs(session, runs=args.runs, rows=args.rows, seed=args.seed, first_run=first)
    if base is not None:
        columns = {k: np.concatenate([np.asarray(base[k], np.float64), columns[k]]) for k in COLUMNS}
    return columns


def run(args: argparse.Namespace) -> int:
    import io

    from tickformer.control.tanks import TwoTanks, log_runs
    from tickformer.durable import atomic_write
    from tickformer.errors import ConfigError

    gym = args.plant.startswith("gym:")
    if not gym and args.plant not in PLANTS:
        raise ConfigError(f"unknown plant {args.plant!r}; choose one of {', '.join(PLANTS)}")
    suffix = args.out.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise ConfigError(f"--out {args.out}: give a .csv or .parquet file name")
    if args.plant == "tanks" or gym:
        if args.policy != "tuned" or args.extend is not None:
            raise ConfigError(
                f"--policy and --extend are for the cartpole plant; remove them for {args.plant}"
            )
    if args.plant == "tanks":
        columns = log_runs(TwoTanks(), runs=args.runs, rows=args.rows, seed=args.seed)
    elif gym:
        from tickformer.control import gym_plant

        env = gym_plant.make_env(args.plant)
        try:
            columns = gym_plant.log_episodes(env, runs=args.runs, rows=args.rows, seed=args.seed)
        finally:
            env.close()
    else:
        columns = _cartpole(args)
    import pyarrow as pa

    table = pa.table(columns)
    buf = io.BytesIO()
    if suffix == ".csv":
        import pyarrow.csv as pacsv

        pacsv.write_csv(table, buf)
    else:
        import pyarrow.parquet as pq

        pq.write_table(table, buf)
    atomic_write(args.out, buf.getvalue())
    rows = len(columns["run"])
    print(
        f"wrote {args.out}: {args.runs} runs x {args.rows} rows of {args.plant}"
        + (f", {args.policy} policy" if args.plant == "cartpole" else "")
        + (f", after the {args.extend} rows" if args.extend else "")
        + (f" ({len(set(columns['run'].tolist()))} runs where the env ended episodes)" if gym else "")
        + f"; {rows} rows in all"
        + f" ({', '.join(columns)})"
    )
    return 0
