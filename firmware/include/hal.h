/* Hardware abstraction boundary: everything the firmware core needs from a board.
 * A port to an MCU (STM32, ESP32, Teensy...) implements these functions in one new
 * hal_<board>.c; the core (src/wire.c, src/app.c, src/telemetry.c) stays unchanged.
 * hal_host.c implements them on POSIX with a pty (serial) and stdin/stdout (sensor in /
 * actuator out, for HIL). */
#ifndef EDGERL_HAL_H
#define EDGERL_HAL_H

#include <stddef.h>
#include <stdint.h>

/* Monotonic microseconds (wraps at 2^32; compare with unsigned subtraction). */
uint32_t hal_micros(void);

/* Read up to cap bytes from the host link without blocking.
 * Returns the count (0 if none) or -1 while the link is down (cable pulled). */
int hal_serial_read(uint8_t *buf, size_t cap);

/* Write bytes to the host link; drops them if the link is down or its buffer is full. */
void hal_serial_write(const uint8_t *buf, size_t n);

/* Drive the actuators with n commands (action units); mode is the firmware Mode. */
void hal_actuator_out(const float *cmd, uint8_t n, uint8_t mode);

/* Fetch the newest plant state if one arrived since the last call: returns 1 and fills
 * state[0..*n-1] (at most cap floats), else 0. */
int hal_sensor_in(float *state, uint8_t cap, uint8_t *n);

/* 1 if the hardware e-stop input (button, safety relay) fired since the last call. The
 * firmware latches its e-stop on it without any host message. */
int hal_estop_input(void);

/* Sleep until I/O is ready or max_us elapsed (an MCU may just return or WFI). */
void hal_wait(uint32_t max_us);

/* How late [us] the most recent timer wake (the 1 ms tick, or a hal_wait timeout) ran past
 * its due time: an MCU's interrupt latency, or on an emulator / a host process the OS's
 * timer delivery. The watchdog records it with a trip (STATUS.safe_entry_late_us): the trip
 * lands within one poll period plus this past the watchdog period. */
uint32_t hal_timer_late_us(void);

#endif /* EDGERL_HAL_H */
