/* POSIX host HAL (hal_host.c): the firmware as a Linux process on a pty. */
#ifndef EDGERL_HAL_HOST_H
#define EDGERL_HAL_HOST_H

/* Open the host link: `device` (e.g. /dev/ttyUSB0 or a socat pty) or, if NULL, a new pty
 * master whose slave path is printed on stdout as "EDGERL_FW_PTY <path>". With plant_stdio,
 * SENSOR frames are read from stdin and ACTUATOR frames written to stdout (HIL plant link).
 * Returns 0 or -1 (errno-style message already on stderr). */
int hal_host_open(const char *device, int plant_stdio);
/* 1 once the plant link (stdin) hit end of file: the harness is gone. */
int hal_host_plant_closed(void);
void hal_host_close(void);

#endif /* EDGERL_HAL_HOST_H */
