"""`tickformer log PLANT --out FILE.csv|FILE.parquet [--runs N] [--rows N] [--seed S]`: log a
simulated plant under an exploration policy to a file `tickformer train --data` reads.

    tanks     two cascaded tanks fed by a pump (tickformer.control.tanks): square-root outflow, a
              pump dead zone and saturation; columns time [s], run, pump [V], level1 [cm], level2 [cm]
    cartpole  MuJoCo's inverted pendulum (gymnasium InvertedPendulum-v5, tickformer.control.cartpole)
              with each run's pole mass, hinge damping and actuator gear drawn from the training
              bands, positions measured with noise, the command 2 ticks late, balanced by the
              nominal LQG plus a random held perturbation; columns time [s], run, command, x [m],
              theta [rad]

The file is written atomically (a reader never sees half of it). docs/your_data.md walks from
such a log to a trained, exported, verified and certified model.
"""

from __future__ import annotations

import argparse

from tickformer.commands import args as shared

PLANTS = ("tanks", "cartpole")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "log",
        help="log a simulated plant under random excitation to a CSV or Parquet file (for train --data)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("plant", help=f"the plant: {', '.join(PLANTS)}")
    shared.out(p, metavar="FILE", help="the file to write: .csv or .parquet")
    p.add_argument("--runs", type=int, default=5, help="runs (episodes) to log (default 5)")
    p.add_argument("--rows", type=int, default=2000, help="samples per run (default 2000)")
    shared.seed(p, help="seed of the runs' start levels and excitation")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import io

    from tickformer.control.tanks import TwoTanks, log_runs
    from tickformer.durable import atomic_write
    from tickformer.errors import ConfigError

    if args.plant not in PLANTS:
        raise ConfigError(f"unknown plant {args.plant!r}; choose one of {', '.join(PLANTS)}")
    suffix = args.out.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise ConfigError(f"--out {args.out}: give a .csv or .parquet file name")
    if args.plant == "tanks":
        columns = log_runs(TwoTanks(), runs=args.runs, rows=args.rows, seed=args.seed)
    else:
        from tickformer.control import cartpole

        columns = cartpole.log_runs(runs=args.runs, rows=args.rows, seed=args.seed)
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
    print(f"wrote {args.out}: {args.runs} runs x {args.rows} rows of {args.plant} ({', '.join(columns)})")
    return 0
