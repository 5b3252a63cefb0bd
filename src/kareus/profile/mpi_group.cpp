// The MPI world behind open_world_group(); without MPI in the build, only the local group.
#include <fmt/format.h>

#include "kareus/core/error.hpp"
#include "kareus/profile/group.hpp"

#ifdef KAREUS_HAVE_MPI
#include <mpi.h>

#include <limits>
#endif

namespace kareus::profile {

#ifdef KAREUS_HAVE_MPI
namespace {

void check(int status, const char* what) {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, text, &length);
  throw DeviceError(fmt::format("MPI: {} failed: {}", what, std::string(text, static_cast<std::size_t>(length))));
}

int to_int(std::size_t n) {
  KAREUS_CHECK(n <= static_cast<std::size_t>(std::numeric_limits<int>::max()), "MPI message too large");
  return static_cast<int>(n);
}

// A communicator and, for the world, the MPI library's lifetime.
class MpiGroup final : public Group {
 public:
  MpiGroup(MPI_Comm comm, bool owns_mpi) : comm_(comm), owns_mpi_(owns_mpi) {
    check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  }
  ~MpiGroup() override {
    if (owns_mpi_) {
      MPI_Finalize();
    } else {
      MPI_Comm_free(&comm_);
    }
  }
  MpiGroup(const MpiGroup&) = delete;
  MpiGroup& operator=(const MpiGroup&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void broadcast(std::string& data) override {
    unsigned long long length = data.size();
    check(MPI_Bcast(&length, 1, MPI_UNSIGNED_LONG_LONG, 0, comm_), "MPI_Bcast");
    data.resize(static_cast<std::size_t>(length));
    check(MPI_Bcast(data.data(), to_int(data.size()), MPI_CHAR, 0, comm_), "MPI_Bcast");
  }

  std::vector<double> gather(const std::vector<double>& values) override {
    std::vector<double> all(rank_ == 0 ? values.size() * static_cast<std::size_t>(size_) : 0);
    check(MPI_Gather(values.data(), to_int(values.size()), MPI_DOUBLE, all.data(), to_int(values.size()),
                     MPI_DOUBLE, 0, comm_),
          "MPI_Gather");
    return all;
  }

  std::pair<std::int64_t, std::int64_t> min_max(std::int64_t value) override {
    std::int64_t low = 0, high = 0;
    check(MPI_Allreduce(&value, &low, 1, MPI_INT64_T, MPI_MIN, comm_), "MPI_Allreduce");
    check(MPI_Allreduce(&value, &high, 1, MPI_INT64_T, MPI_MAX, comm_), "MPI_Allreduce");
    return {low, high};
  }

  void barrier() override { check(MPI_Barrier(comm_), "MPI_Barrier"); }

  std::unique_ptr<Group> split(int color, int key) override {
    MPI_Comm part = MPI_COMM_NULL;
    check(MPI_Comm_split(comm_, color, key, &part), "MPI_Comm_split");
    return std::make_unique<MpiGroup>(part, false);
  }

  [[noreturn]] void abort(int exit_code) override {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);
  }

 private:
  MPI_Comm comm_;
  bool owns_mpi_;
  int rank_ = 0, size_ = 1;
};

}  // namespace

bool built_with_mpi() { return true; }

std::unique_ptr<Group> open_world_group() {
  if (!launched_by_mpi()) return std::make_unique<LocalGroup>();
  int initialised = 0;
  check(MPI_Initialized(&initialised), "MPI_Initialized");
  if (initialised) throw InternalError("MPI initialised twice");
  check(MPI_Init(nullptr, nullptr), "MPI_Init");
  // Errors come back as codes (turned into DeviceError) rather than aborting inside MPI.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  return std::make_unique<MpiGroup>(MPI_COMM_WORLD, true);
}

#else

bool built_with_mpi() { return false; }

std::unique_ptr<Group> open_world_group() {
  if (launched_by_mpi()) {
    throw InputError({"", 0, 0, "mpirun"},
                     "this kareus was built without MPI (install libopenmpi-dev and rebuild) but was "
                     "started by an MPI launcher");
  }
  return std::make_unique<LocalGroup>();
}

#endif

}  // namespace kareus::profile
