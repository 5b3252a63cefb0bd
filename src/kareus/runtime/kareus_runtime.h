/* The Kareus runtime's C API: GPUs (real through NVML, or simulated), the frequency controller,
 * the plan cursor and the energy monitor, for training frameworks that are not C++ (ctypes, Rust,
 * Lua, ...). It mirrors the C++ classes of src/kareus/runtime/ one to one.
 *
 * Conventions: every function that can fail returns a kareus_status; on failure,
 * kareus_last_error() holds a message for the calling thread until its next failing call. Handles
 * are opaque; each *_new or *_open has a *_free, which accepts NULL. Units are in the names (MHz,
 * mJ, J, s). A GPU handle may be shared by a controller and a monitor and freed before them (they
 * hold their own references).
 *
 * Thread-safety: as the C++ classes (GPUs, controllers and monitors: any thread; a cursor: one
 * thread at a time).
 *
 * Example:
 *   kareus_gpu* gpu; kareus_controller* controller; kareus_cursor* cursor; const char* knobs;
 *   kareus_gpu_open_nvml(0, &gpu);
 *   kareus_controller_new(&gpu, 1, &controller);
 *   kareus_cursor_new("plan.json", -1, stage, controller, &cursor);
 *   kareus_cursor_on_instruction_begin(cursor, "forward", -1, &knobs);   // knobs: JSON (see below)
 */
#ifndef KAREUS_RUNTIME_H_
#define KAREUS_RUNTIME_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kareus_status {
  KAREUS_OK = 0,
  KAREUS_ERROR_INPUT = 1,      /* bad argument, plan or file; or a plan/loop mismatch */
  KAREUS_ERROR_DEVICE = 2,     /* the GPU or its driver failed (incl. "NVML not available") */
  KAREUS_ERROR_PERMISSION = 3, /* clock or power setting needs root or CAP_SYS_ADMIN */
  KAREUS_ERROR_INTERNAL = 4    /* a bug in Kareus */
} kareus_status;

typedef struct kareus_clock kareus_clock; /* a hand-advanced time source */
typedef struct kareus_gpu kareus_gpu;
typedef struct kareus_controller kareus_controller;
typedef struct kareus_cursor kareus_cursor;
typedef struct kareus_monitor kareus_monitor;

/* The calling thread's last error message; "" when none. Valid until its next failing call. */
const char* kareus_last_error(void);

/* Time: a manual clock starting at 0 s, shared by fake GPUs and monitors for deterministic runs. */
kareus_status kareus_clock_new_manual(kareus_clock** out);
kareus_status kareus_clock_advance_s(kareus_clock* clock, double seconds);
kareus_status kareus_clock_now_s(const kareus_clock* clock, double* out_s);
void kareus_clock_free(kareus_clock* clock);

/* GPUs. cuda_index counts as CUDA does (after CUDA_VISIBLE_DEVICES). */
kareus_status kareus_gpu_count_nvml(int* out_count);
kareus_status kareus_gpu_open_nvml(int cuda_index, kareus_gpu** out);
/* A simulated A100-like GPU; `clock` may be NULL (the steady clock). */
kareus_status kareus_gpu_open_fake(int index, kareus_clock* clock, kareus_gpu** out);
void kareus_gpu_free(kareus_gpu* gpu);
kareus_status kareus_gpu_index(const kareus_gpu* gpu, int* out_index);
/* Copies the NUL-terminated name into buffer (truncated to size). */
kareus_status kareus_gpu_name(const kareus_gpu* gpu, char* buffer, size_t size);
/* Fills up to `capacity` clocks, highest first; *out_count is the full count. */
kareus_status kareus_gpu_supported_sm_clocks_mhz(const kareus_gpu* gpu, int* clocks_mhz,
                                                 size_t capacity, size_t* out_count);
kareus_status kareus_gpu_current_sm_clock_mhz(const kareus_gpu* gpu, int* out_mhz);
kareus_status kareus_gpu_total_energy_mj(const kareus_gpu* gpu, double* out_mj);
kareus_status kareus_gpu_instant_power_mw(const kareus_gpu* gpu, double* out_mw);
/* Fake GPUs only (KAREUS_ERROR_INPUT otherwise): the simulated load in [0, 1], and the locked SM
 * clock (*out_locked = 0 when unlocked, then *out_mhz is untouched). */
kareus_status kareus_fake_gpu_set_load(kareus_gpu* gpu, double load);
kareus_status kareus_fake_gpu_locked_sm_clock_mhz(const kareus_gpu* gpu, int* out_locked,
                                                  int* out_mhz);

/* Frequency controller over `count` GPUs: memory clock locked to its maximum, power limit reset to
 * the default (the limit found at start is restored), clocks reset on stop/free/exit/SIGINT/SIGTERM.
 * Requests never block. */
kareus_status kareus_controller_new(kareus_gpu* const* gpus, size_t count, kareus_controller** out);
kareus_status kareus_controller_request_sm_clock(kareus_controller* controller, int clock_mhz);
kareus_status kareus_controller_request_reset(kareus_controller* controller);
kareus_status kareus_controller_wait_idle(kareus_controller* controller);
kareus_status kareus_controller_stop(kareus_controller* controller);
typedef struct kareus_controller_stats {
  long requests, unchanged, superseded, snapped, applied, errors;
  double mean_latency_s, median_latency_s, max_latency_s;
} kareus_controller_stats;
kareus_status kareus_controller_stats_of(const kareus_controller* controller, size_t position,
                                         kareus_controller_stats* out);
void kareus_controller_free(kareus_controller* controller);

/* Plan cursor for pipeline stage `stage`. plan_index < 0: the file holds one plan; >= 0: the
 * index into a plan set. `controller` may be NULL (knobs only). */
kareus_status kareus_cursor_new(const char* plan_path, int plan_index, int stage,
                                kareus_controller* controller, kareus_cursor** out);
/* A cursor over every plan of a plan set (plans.json: a frontier), starting on the one `start`
 * selects: "max-throughput" (also for NULL), "min-energy", "deadline:SECONDS" or "energy:JOULES".
 */
kareus_status kareus_cursor_new_frontier(const char* plans_path, const char* start, int stage,
                                         kareus_controller* controller, kareus_cursor** out);
/* type: "forward", "backward", "backward_input" or "backward_weight" (zb-h1's B and W);
 * microbatch < 0: not checked. *out_knobs_json: the instruction's knobs in the plan's schema
 * (docs/plan-format.md), always both lists:
 *   {"partitions": [{"key": "fwd_attn", "slot": "linear_1", "sms": 12}, ...], "recompute": [...]}
 * (both empty without knobs); valid until the cursor's next call or free. */
kareus_status kareus_cursor_on_instruction_begin(kareus_cursor* cursor, const char* type,
                                                 int microbatch, const char** out_knobs_json);
kareus_status kareus_cursor_on_step_end(kareus_cursor* cursor);
kareus_status kareus_cursor_position(const kareus_cursor* cursor, size_t* out_position);
/* Iterations ended so far (0-based index of the running one). */
kareus_status kareus_cursor_iteration(const kareus_cursor* cursor, long* out_iteration);
/* Stragglers: from iteration `effective_iteration` on, run the least-energy plan of the frontier
 * that takes at most `target_time_s` per iteration (the fastest when none does). Every rank of a
 * pipeline must make the call with the same effective_iteration, which must not have begun on
 * the calling rank (KAREUS_ERROR_INPUT otherwise): that is how all ranks switch at one iteration.
 * *out_plan_index (may be NULL): the plan chosen. on_straggler takes the straggler pipeline's
 * iteration time and does the same. */
kareus_status kareus_cursor_set_target_time(kareus_cursor* cursor, double target_time_s,
                                            long effective_iteration, size_t* out_plan_index);
kareus_status kareus_cursor_on_straggler(kareus_cursor* cursor, double iteration_time_s,
                                         long effective_iteration, size_t* out_plan_index);
/* GPU-timed clocks: from the next instruction on, the cursor asks for each instruction's clock when
 * the GPU reaches it on the framework's CUDA stream (a cudaStream_t or CUstream, NULL the legacy
 * default stream), through a marker it enqueues there (the CUDA driver's cuLaunchHostFunc, loaded
 * at run time); the host never waits. Call it on a thread where the stream's context is current.
 * Without it, the clock is asked for when the host begins the instruction. KAREUS_ERROR_DEVICE
 * when the CUDA driver cannot be loaded. */
kareus_status kareus_cursor_set_cuda_stream(kareus_cursor* cursor, void* cuda_stream);
/* The same through the caller's own marker: `enqueue(user, fn, arg)` must arrange for fn(arg) to
 * run once the GPU reaches the point where it is called, exactly once, and return 0 (non-zero: the
 * marker could not be enqueued, a device error). fn may run on any thread. NULL enqueue: back to
 * host-timed clocks. */
typedef void (*kareus_gpu_callback)(void* arg);
typedef int (*kareus_marker_enqueue)(void* user, kareus_gpu_callback fn, void* arg);
kareus_status kareus_cursor_set_marker(kareus_cursor* cursor, kareus_marker_enqueue enqueue, void* user);
/* The plan the running iteration follows (its index in the frontier), and its time and energy. */
kareus_status kareus_cursor_plan_index(const kareus_cursor* cursor, size_t* out_plan_index,
                                       double* out_time_s, double* out_energy_j);
void kareus_cursor_free(kareus_cursor* cursor);

/* Energy monitor over `count` GPUs; log_csv and clock may be NULL. */
kareus_status kareus_monitor_new(kareus_gpu* const* gpus, size_t count, const char* log_csv,
                                 kareus_clock* clock, kareus_monitor** out);
kareus_status kareus_monitor_begin_window(kareus_monitor* monitor, const char* name);
/* Fills up to `capacity` per-GPU energies (J); either output may be NULL. */
kareus_status kareus_monitor_end_window(kareus_monitor* monitor, const char* name,
                                        double* out_elapsed_s, double* gpu_energy_j,
                                        size_t capacity);
kareus_status kareus_monitor_cancel_window(kareus_monitor* monitor, const char* name);
void kareus_monitor_free(kareus_monitor* monitor);

#ifdef __cplusplus
}
#endif

#endif /* KAREUS_RUNTIME_H_ */
