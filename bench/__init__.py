"""edgerl.bench: every measuring path (``edgerl bench``, ``make bench``).

Each figure is reported beside its limit measured in the same run (a ratio). Sub-packages by
what they measure: ``sim`` (env-steps/s against raw physics), ``train`` (PPO throughput,
time to solve), ``loop`` (the bare fixed-rate loop), ``planner`` (planner-server load),
``hil`` (firmware round trips and the on-MCU edit step).
"""
