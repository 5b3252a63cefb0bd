#include "kareus/core/paths.hpp"

#include <cstdlib>

namespace kareus {

std::filesystem::path data_dir() {
  if (const char* dir = std::getenv("KAREUS_DATA_DIR"); dir && *dir) return dir;
  return KAREUS_BUILTIN_DATA_DIR;
}

}  // namespace kareus
