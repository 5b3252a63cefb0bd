/* Compiles kareus_runtime.h as C99, so that the C API stays usable from C. */
#include "kareus/runtime/kareus_runtime.h"

int kareus_runtime_c_header_check(void);
int kareus_runtime_c_header_check(void) {
  kareus_controller_stats stats = {0, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0};
  return (int)stats.requests + (int)KAREUS_OK;
}
