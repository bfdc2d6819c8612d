"""Hardware-in-the-loop measurements: command round trips, the on-MCU edit step."""
