// Where Kareus finds its bundled data (model and GPU descriptions, measured profiles): the
// KAREUS_DATA_DIR environment variable when set, else the source tree's data/ this build came from.
#pragma once

#include <filesystem>

namespace kareus {

std::filesystem::path data_dir();

}  // namespace kareus
