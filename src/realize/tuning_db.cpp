#include "realize/tuning_db.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "core/error.h"

namespace fact {
namespace fs = std::filesystem;

namespace {

// PRAGMA application_id marks the file as ours ("FACT" in ASCII), so `fact` never writes into a
// database that some other program owns.
constexpr int kApplicationId = 0x46414354;
constexpr int kSchemaVersion = 1;
constexpr const char* kNow = "strftime('%Y-%m-%dT%H:%M:%SZ','now')";

constexpr const char* kSchemaSql = R"sql(
CREATE TABLE fact_schema (version INTEGER NOT NULL);
CREATE TABLE workloads (
  id INTEGER PRIMARY KEY,
  key TEXT NOT NULL UNIQUE,              -- WorkloadKey::canonical(): the lookup of a warm tune
  pattern TEXT NOT NULL, shape TEXT NOT NULL, dtype TEXT NOT NULL, layout TEXT NOT NULL,
  numerics TEXT NOT NULL, arch TEXT NOT NULL, cutlass_version TEXT NOT NULL, nvcc_version TEXT NOT NULL,
  device_name TEXT NOT NULL DEFAULT '',
  baseline_name TEXT, baseline_ms REAL, baseline_rel_err REAL, baseline_max_abs_err REAL,
  winner TEXT,                           -- a candidate's config_id, 'baseline', or NULL while undecided
  created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE TABLE candidates (
  workload_id INTEGER NOT NULL REFERENCES workloads(id) ON DELETE CASCADE,
  config_id TEXT NOT NULL, config TEXT NOT NULL, status TEXT NOT NULL,
  time_ms REAL, rel_err REAL, max_abs_err REAL, message TEXT NOT NULL DEFAULT '',
  updated_at TEXT NOT NULL,
  PRIMARY KEY (workload_id, config_id)) WITHOUT ROWID;
)sql";

std::string not_a_database_message(const fs::path& path, const std::string& sqlite_message) {
  return "'" + path.string() + "' is not a FACT tuning database (SQLite says: " + sqlite_message +
         "; it is not an SQLite file or it is corrupt). Move it aside (FACT then creates a fresh one) or pass "
         "--db PATH / set FACT_TUNING_DB to another file";
}

[[noreturn]] void throw_sqlite(sqlite3* db, const fs::path& path, const std::string& what) {
  int code = sqlite3_errcode(db);
  std::string message = sqlite3_errmsg(db);
  if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT) throw Error(not_a_database_message(path, message));
  std::string hint = (code == SQLITE_BUSY || code == SQLITE_LOCKED)
                         ? "; another process holds the database locked, retry when it finishes"
                     : (code == SQLITE_READONLY || code == SQLITE_CANTOPEN || code == SQLITE_PERM)
                         ? "; check that the file and its folder are writable, or pass --db PATH"
                         : "";
  throw Error("tuning database '" + path.string() + "': " + what + " failed: " + message + hint);
}

// A prepared statement bound to one database; finalized on scope exit.
class Statement {
 public:
  Statement(sqlite3* db, const fs::path& path, const std::string& sql) : db_(db), path_(path) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) throw_sqlite(db, path, "a query");
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int i, const std::string& v) {
    return check(sqlite3_bind_text(stmt_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
  }
  Statement& bind(int i, long long v) { return check(sqlite3_bind_int64(stmt_, i, v)); }
  Statement& bind(int i, const std::optional<double>& v) {
    return check(v && std::isfinite(*v) ? sqlite3_bind_double(stmt_, i, *v) : sqlite3_bind_null(stmt_, i));
  }
  // True while there is a row to read.
  bool step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw_sqlite(db_, path_, "a query");
  }
  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  std::string text(int col) const {
    auto p = sqlite3_column_text(stmt_, col);
    return p ? reinterpret_cast<const char*>(p) : "";
  }
  long long integer(int col) const { return sqlite3_column_int64(stmt_, col); }
  std::optional<double> real(int col) const {
    if (sqlite3_column_type(stmt_, col) == SQLITE_NULL) return std::nullopt;
    return sqlite3_column_double(stmt_, col);
  }
  bool is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

 private:
  Statement& check(int rc) {
    if (rc != SQLITE_OK) throw_sqlite(db_, path_, "binding a value");
    return *this;
  }
  sqlite3* db_;
  const fs::path& path_;
  sqlite3_stmt* stmt_ = nullptr;
};

void exec(sqlite3* db, const fs::path& path, const std::string& sql, const std::string& what) {
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) throw_sqlite(db, path, what);
}

// BEGIN IMMEDIATE takes the write lock up front, so two tuners never deadlock upgrading a read lock.
class Transaction {
 public:
  Transaction(sqlite3* db, const fs::path& path) : db_(db), path_(path) {
    exec(db, path, "BEGIN IMMEDIATE", "starting a transaction");
  }
  ~Transaction() {
    if (!committed_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void commit() {
    exec(db_, path_, "COMMIT", "committing");
    committed_ = true;
  }

 private:
  sqlite3* db_;
  const fs::path& path_;
  bool committed_ = false;
};

// An exclusive flock on the database's folder, held while one process opens (and maybe sets up) the file. The
// folder, not the file: closing any descriptor of the database file would drop SQLite's own POSIX locks on it.
class SetupLock {
 public:
  explicit SetupLock(const fs::path& db_path) {
    fs::path folder = db_path.has_parent_path() ? db_path.parent_path() : fs::path(".");
    fd_ = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    // A folder we cannot open or lock (some network file systems) leaves opening unserialized, as SQLite alone has it.
    if (fd_ >= 0 && ::flock(fd_, LOCK_EX) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~SetupLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the flock
  }
  SetupLock(const SetupLock&) = delete;
  SetupLock& operator=(const SetupLock&) = delete;

 private:
  int fd_ = -1;
};

std::string trimmed(const std::string& s) {
  auto begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r\n") - begin + 1);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// 128.0 and 128 describe the same shape; write both as 128. Object keys are sorted by nlohmann::json.
nlohmann::json canonical_shape(const nlohmann::json& shape) {
  if (shape.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto& [k, v] : shape.items()) out[trimmed(k)] = canonical_shape(v);
    return out;
  }
  if (shape.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (auto& v : shape) out.push_back(canonical_shape(v));
    return out;
  }
  if (shape.is_number_float()) {
    double d = shape.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return static_cast<long long>(d);
  }
  if (shape.is_number_unsigned()) return shape.get<long long>();
  return shape;
}

WorkloadKey canonicalized(const WorkloadKey& key) {
  WorkloadKey c;
  c.pattern = trimmed(key.pattern);
  c.shape = canonical_shape(key.shape);
  c.dtype = lower(trimmed(key.dtype));
  c.layout = lower(trimmed(key.layout));
  c.numerics = trimmed(key.numerics);
  c.arch = lower(trimmed(key.arch));
  c.cutlass_version = trimmed(key.cutlass_version);
  c.nvcc_version = trimmed(key.nvcc_version);
  return c;
}

nlohmann::json optional_json(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

nlohmann::json parse_stored_json(const std::string& text) {
  auto parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return parsed.is_discarded() ? nlohmann::json(text) : parsed;
}

// The columns of a WorkloadSummary, read back by read_summary() in this order.
std::string summary_select(const std::string& where) {
  return fmt::format(R"sql(
SELECT w.id, w.pattern, w.shape, w.dtype, w.layout, w.numerics, w.arch, w.cutlass_version, w.nvcc_version,
       w.device_name,
       (SELECT COUNT(*) FROM candidates c WHERE c.workload_id = w.id),
       (SELECT COUNT(*) FROM candidates c WHERE c.workload_id = w.id AND c.status = 'ok'),
       w.winner,
       CASE WHEN w.winner = 'baseline' THEN w.baseline_ms
            WHEN w.winner IS NOT NULL THEN
              (SELECT time_ms FROM candidates c WHERE c.workload_id = w.id AND c.config_id = w.winner)
            ELSE (SELECT MIN(time_ms) FROM candidates c WHERE c.workload_id = w.id AND c.status = 'ok') END,
       w.baseline_ms, w.created_at, w.updated_at,
       w.baseline_name, w.baseline_rel_err, w.baseline_max_abs_err
FROM workloads w {} ORDER BY w.id)sql",
                     where);
}

WorkloadSummary read_summary(const Statement& s) {
  WorkloadSummary w;
  w.id = s.integer(0);
  w.key.pattern = s.text(1);
  w.key.shape = parse_stored_json(s.text(2));
  w.key.dtype = s.text(3);
  w.key.layout = s.text(4);
  w.key.numerics = s.text(5);
  w.key.arch = s.text(6);
  w.key.cutlass_version = s.text(7);
  w.key.nvcc_version = s.text(8);
  w.device_name = s.text(9);
  w.candidates = static_cast<int>(s.integer(10));
  w.ok_candidates = static_cast<int>(s.integer(11));
  w.winner = s.text(12);
  w.best_ms = s.real(13);
  w.baseline_ms = s.real(14);
  w.created_at = s.text(15);
  w.updated_at = s.text(16);
  return w;
}

void require_workload(sqlite3* db, const fs::path& path, long long workload_id) {
  Statement s(db, path, "SELECT 1 FROM workloads WHERE id = ?");
  s.bind(1, workload_id);
  if (!s.step())
    throw Error(fmt::format("tuning database '{}' has no workload {}; call upsert_workload first (or see `fact db list`)",
                            path.string(), workload_id));
}

}  // namespace

std::string WorkloadKey::canonical() const { return to_json(canonicalized(*this)).dump(); }

std::optional<double> WorkloadSummary::speedup() const {
  if (!best_ms || !baseline_ms || *best_ms <= 0) return std::nullopt;
  return *baseline_ms / *best_ms;
}

nlohmann::json to_json(const WorkloadKey& key) {
  return {{"pattern", key.pattern}, {"shape", key.shape},       {"dtype", key.dtype},
          {"layout", key.layout},   {"numerics", key.numerics}, {"arch", key.arch},
          {"cutlass_version", key.cutlass_version}, {"nvcc_version", key.nvcc_version}};
}

nlohmann::json to_json(const WorkloadDetail& detail) {
  const WorkloadSummary& w = detail.summary;
  nlohmann::json candidates = nlohmann::json::array();
  for (const auto& c : detail.candidates)
    candidates.push_back({{"config_id", c.config_id},
                          {"config", c.config},
                          {"status", c.status},
                          {"time_ms", optional_json(c.time_ms)},
                          {"rel_err", optional_json(c.rel_err)},
                          {"max_abs_err", optional_json(c.max_abs_err)},
                          {"message", c.message},
                          {"updated_at", c.updated_at}});
  return {{"id", w.id},
          {"key", to_json(w.key)},
          {"device_name", w.device_name},
          {"winner", w.winner.empty() ? nlohmann::json() : nlohmann::json(w.winner)},
          {"best_ms", optional_json(w.best_ms)},
          {"speedup", optional_json(w.speedup())},
          {"baseline",
           {{"name", detail.baseline.name},
            {"time_ms", optional_json(detail.baseline.time_ms)},
            {"rel_err", optional_json(detail.baseline.rel_err)},
            {"max_abs_err", optional_json(detail.baseline.max_abs_err)}}},
          {"created_at", w.created_at},
          {"updated_at", w.updated_at},
          {"candidates", candidates}};
}

fs::path default_tuning_db_path() {
  if (const char* v = std::getenv("FACT_TUNING_DB"); v && *v) return v;
  const char* home = std::getenv("HOME");
  if (!home || !*home) throw Error("cannot place the tuning database: HOME is not set; set FACT_TUNING_DB or pass --db PATH");
  return fs::path(home) / ".cache" / "fact" / "tuning.sqlite";
}

TuningDb TuningDb::open(const fs::path& path) {
  if (path.has_parent_path()) {
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    if (ec || !fs::is_directory(path.parent_path()))
      throw Error("cannot create the folder '" + path.parent_path().string() + "' for the tuning database" +
                  (ec ? ": " + ec.message() : "") + "; pass --db PATH or set FACT_TUNING_DB to a writable place");
  }
  if (fs::is_directory(path))
    throw Error("tuning database path '" + path.string() + "' is a folder; pass a file path such as " +
                (path / "tuning.sqlite").string());

  // Opening is serialized among processes: a file that is new or still in rollback mode is set up (schema,
  // WAL switch) by one of them while the others wait. Unserialized, a connection that read the header before
  // another process switched the file to WAL can never take the exclusive lock the switch needs, and a reader
  // can see the schema's tables a moment before the application id that marks them as FACT's.
  SetupLock setup_lock(path);

  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  TuningDb db(path, raw);  // owns raw from here, even when open failed
  if (rc != SQLITE_OK) throw_sqlite(raw, path, "opening");
  sqlite3_busy_timeout(raw, 10000);  // wait for another tuner's write rather than fail

  // The first read makes SQLite parse the file header: a non-SQLite or corrupt file fails here.
  auto application_id = [&] {
    Statement s(raw, db.path_, "PRAGMA application_id");
    s.step();
    return static_cast<int>(s.integer(0));
  };
  auto user_tables = [&] {
    Statement s(raw, db.path_, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name");
    std::vector<std::string> names;
    while (s.step()) names.push_back(s.text(0));
    return names;
  };
  int app = application_id();
  if (app != kApplicationId) {
    auto tables = user_tables();
    if (app != 0 || !tables.empty()) {
      std::string listed;
      for (const auto& t : tables) listed += (listed.empty() ? "" : ", ") + t;
      throw Error(fmt::format(
          "'{}' is an SQLite database of another application (application_id {:#x}, tables: {}); FACT will not "
          "write into it. Pass --db PATH or set FACT_TUNING_DB to another file",
          path.string(), static_cast<unsigned>(app), listed.empty() ? "none" : listed));
    }
  }

  // WAL lets readers (`fact db list`) run while a tuner writes; only set once the file is known to be ours.
  // The pragma answers the mode in force: anything but "wal" means the switch did not happen.
  {
    Statement s(raw, db.path_, "PRAGMA journal_mode = WAL");
    std::string mode = s.step() ? s.text(0) : "";
    if (mode != "wal")
      throw Error("tuning database '" + path.string() + "': switching to WAL failed (journal mode stays '" + mode +
                  "'); another program may hold the file open, retry when it finishes or pass --db PATH");
  }
  // NORMAL is safe under WAL (a power cut may lose the last commit, never corrupt) and spares an fsync per write.
  exec(raw, db.path_, "PRAGMA synchronous = NORMAL", "setting synchronous");
  exec(raw, db.path_, "PRAGMA foreign_keys = ON", "enabling foreign keys");

  if (app != kApplicationId) {
    Transaction t(raw, db.path_);
    exec(raw, db.path_, kSchemaSql, "creating the schema");
    exec(raw, db.path_, fmt::format("INSERT INTO fact_schema (version) VALUES ({})", kSchemaVersion), "creating the schema");
    exec(raw, db.path_, fmt::format("PRAGMA application_id = {}", kApplicationId), "marking the file as FACT's");
    t.commit();
  }

  int version = 0;
  try {
    Statement s(raw, db.path_, "SELECT MAX(version) FROM fact_schema");
    if (s.step()) version = static_cast<int>(s.integer(0));
  } catch (const Error& e) {
    throw Error("tuning database '" + path.string() + "' is marked as FACT's but its schema is damaged (" + e.what() +
                "); move it aside and FACT creates a fresh one");
  }
  if (version > kSchemaVersion)
    throw Error(fmt::format("tuning database '{}' has schema version {}, newer than this fact understands ({}); "
                            "update fact or pass --db PATH to use another file",
                            path.string(), version, kSchemaVersion));
  if (version < 1)
    throw Error("tuning database '" + path.string() +
                "' is marked as FACT's but has no schema version; move it aside and FACT creates a fresh one");
  return db;
}

TuningDb::~TuningDb() {
  if (db_) sqlite3_close_v2(db_);
}

TuningDb::TuningDb(TuningDb&& other) noexcept : path_(std::move(other.path_)), db_(other.db_) { other.db_ = nullptr; }

TuningDb& TuningDb::operator=(TuningDb&& other) noexcept {
  if (this != &other) {
    if (db_) sqlite3_close_v2(db_);
    path_ = std::move(other.path_);
    db_ = other.db_;
    other.db_ = nullptr;
  }
  return *this;
}

long long TuningDb::upsert_workload(const WorkloadKey& key, const std::string& device_name) {
  WorkloadKey c = canonicalized(key);
  if (c.pattern.empty() || c.arch.empty())
    throw Error("workload key needs at least a pattern and an arch (got pattern '" + key.pattern + "', arch '" +
                key.arch + "')");
  Statement s(db_, path_, fmt::format(R"sql(
INSERT INTO workloads (key, pattern, shape, dtype, layout, numerics, arch, cutlass_version, nvcc_version,
                       device_name, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {0}, {0})
ON CONFLICT (key) DO UPDATE SET device_name = excluded.device_name, updated_at = excluded.updated_at
RETURNING id)sql", kNow));
  s.bind(1, to_json(c).dump()).bind(2, c.pattern).bind(3, c.shape.dump()).bind(4, c.dtype).bind(5, c.layout);
  s.bind(6, c.numerics).bind(7, c.arch).bind(8, c.cutlass_version).bind(9, c.nvcc_version).bind(10, device_name);
  if (!s.step()) throw_sqlite(db_, path_, "recording the workload");
  long long id = s.integer(0);
  while (s.step()) {
  }
  return id;
}

std::optional<long long> TuningDb::find_workload(const WorkloadKey& key) {
  Statement s(db_, path_, "SELECT id FROM workloads WHERE key = ?");
  s.bind(1, key.canonical());
  if (!s.step()) return std::nullopt;
  return s.integer(0);
}

void TuningDb::record_candidates(long long workload_id, const std::vector<CandidateRecord>& candidates) {
  Transaction t(db_, path_);
  require_workload(db_, path_, workload_id);
  Statement s(db_, path_, fmt::format(R"sql(
INSERT INTO candidates (workload_id, config_id, config, status, time_ms, rel_err, max_abs_err, message, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, {})
ON CONFLICT (workload_id, config_id) DO UPDATE SET
  config = excluded.config, status = excluded.status, time_ms = excluded.time_ms, rel_err = excluded.rel_err,
  max_abs_err = excluded.max_abs_err, message = excluded.message, updated_at = excluded.updated_at)sql", kNow));
  for (const auto& c : candidates) {
    if (c.config_id.empty() || c.config_id == kBaselineWinner)
      throw Error("candidate config id '" + c.config_id + "' is empty or reserved; give each candidate its config id");
    s.bind(1, workload_id).bind(2, c.config_id).bind(3, c.config.dump()).bind(4, c.status);
    s.bind(5, c.time_ms).bind(6, c.rel_err).bind(7, c.max_abs_err).bind(8, c.message);
    s.step();
    s.reset();
  }
  Statement touch(db_, path_, fmt::format("UPDATE workloads SET updated_at = {} WHERE id = ?", kNow));
  touch.bind(1, workload_id).step();
  t.commit();
}

void TuningDb::record_baseline(long long workload_id, const BaselineRecord& baseline) {
  Transaction t(db_, path_);
  require_workload(db_, path_, workload_id);
  Statement s(db_, path_, fmt::format(R"sql(
UPDATE workloads SET baseline_name = ?, baseline_ms = ?, baseline_rel_err = ?, baseline_max_abs_err = ?,
                     updated_at = {} WHERE id = ?)sql", kNow));
  s.bind(1, baseline.name).bind(2, baseline.time_ms).bind(3, baseline.rel_err).bind(4, baseline.max_abs_err);
  s.bind(5, workload_id).step();
  t.commit();
}

void TuningDb::set_winner(long long workload_id, const std::string& winner) {
  Transaction t(db_, path_);
  require_workload(db_, path_, workload_id);
  if (winner != kBaselineWinner) {
    Statement s(db_, path_, "SELECT status FROM candidates WHERE workload_id = ? AND config_id = ?");
    s.bind(1, workload_id).bind(2, winner);
    if (!s.step())
      throw Error(fmt::format("cannot make '{}' the winner of workload {}: it is not a recorded candidate; "
                              "record_candidates first, or pass \"{}\"",
                              winner, workload_id, kBaselineWinner));
    if (s.text(0) != "ok")
      throw Error(fmt::format("cannot make '{}' the winner of workload {}: its status is '{}', not 'ok' "
                              "(only a verified, measured candidate may win)",
                              winner, workload_id, s.text(0)));
  }
  Statement s(db_, path_, fmt::format("UPDATE workloads SET winner = ?, updated_at = {} WHERE id = ?", kNow));
  s.bind(1, winner).bind(2, workload_id).step();
  t.commit();
}

bool TuningDb::forget_workload(long long workload_id) {
  Transaction t(db_, path_);
  Statement(db_, path_, "DELETE FROM candidates WHERE workload_id = ?").bind(1, workload_id).step();
  Statement s(db_, path_, "DELETE FROM workloads WHERE id = ?");
  s.bind(1, workload_id).step();
  const bool found = sqlite3_changes(db_) > 0;
  t.commit();
  return found;
}

namespace {

// A winner from a row of (workload id, winner, its candidate's config and time, baseline ms, device name, baseline
// name, the fastest ok candidate's ms).
Winner read_winner(Statement& s) {
  Winner w;
  w.workload_id = s.integer(0);
  w.config_id = s.text(1);
  w.baseline_ms = s.real(4);
  w.device_name = s.text(5);
  w.baseline_name = s.text(6);
  w.best_candidate_ms = s.real(7);
  if (w.config_id == kBaselineWinner) {
    w.time_ms = w.baseline_ms;
  } else {
    w.config = s.is_null(2) ? nlohmann::json() : parse_stored_json(s.text(2));
    w.time_ms = s.real(3);
  }
  return w;
}

}  // namespace

std::optional<Winner> TuningDb::get_winner(const WorkloadKey& key) {
  Statement s(db_, path_, R"sql(
SELECT w.id, w.winner, c.config, c.time_ms, w.baseline_ms, w.device_name, w.baseline_name,
  (SELECT MIN(b.time_ms) FROM candidates b WHERE b.workload_id = w.id AND b.status = 'ok')
FROM workloads w LEFT JOIN candidates c ON c.workload_id = w.id AND c.config_id = w.winner
WHERE w.key = ? AND w.winner IS NOT NULL)sql");
  s.bind(1, key.canonical());
  if (!s.step()) return std::nullopt;
  return read_winner(s);
}

namespace {

// The shape without the free fields (absent ones are fine: a shape need not have every field).
nlohmann::json without_fields(nlohmann::json shape, const std::vector<std::string>& free_fields) {
  for (const auto& field : free_fields) {
    nlohmann::json::json_pointer ptr(field);
    if (shape.contains(ptr)) shape[ptr.parent_pointer()].erase(ptr.back());
  }
  return shape;
}

// How far apart two shapes' first free field is (|log ratio|); 0 when it is not a positive number in both.
double free_field_distance(const nlohmann::json& a, const nlohmann::json& b, const std::vector<std::string>& free_fields) {
  if (free_fields.empty()) return 0;
  nlohmann::json::json_pointer ptr(free_fields.front());
  if (!a.contains(ptr) || !b.contains(ptr) || !a[ptr].is_number() || !b[ptr].is_number()) return 0;
  double x = a[ptr].get<double>(), y = b[ptr].get<double>();
  return x > 0 && y > 0 ? std::fabs(std::log(x / y)) : 0;
}

}  // namespace

std::vector<Winner> TuningDb::neighbour_winners(const WorkloadKey& key, const std::vector<std::string>& free_fields) {
  const WorkloadKey c = canonicalized(key);
  const nlohmann::json fixed = without_fields(c.shape, free_fields);
  Statement s(db_, path_, R"sql(
SELECT w.id, w.winner, c.config, c.time_ms, w.baseline_ms, w.device_name, w.baseline_name, NULL, w.shape
FROM workloads w JOIN candidates c ON c.workload_id = w.id AND c.config_id = w.winner
WHERE w.pattern = ? AND w.dtype = ? AND w.layout = ? AND w.numerics = ? AND w.arch = ? AND w.cutlass_version = ?
  AND w.nvcc_version = ? AND w.key <> ? AND w.winner <> ? ORDER BY w.id)sql");
  s.bind(1, c.pattern).bind(2, c.dtype).bind(3, c.layout).bind(4, c.numerics).bind(5, c.arch);
  s.bind(6, c.cutlass_version).bind(7, c.nvcc_version).bind(8, key.canonical()).bind(9, std::string(kBaselineWinner));
  std::vector<std::pair<double, Winner>> found;
  while (s.step()) {
    nlohmann::json shape = parse_stored_json(s.text(8));
    if (s.is_null(2) || without_fields(shape, free_fields) != fixed) continue;
    found.emplace_back(free_field_distance(shape, c.shape, free_fields), read_winner(s));
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Winner> out;
  for (auto& [distance, w] : found) out.push_back(std::move(w));
  return out;
}

std::vector<WorkloadSummary> TuningDb::list_workloads() {
  Statement s(db_, path_, summary_select(""));
  std::vector<WorkloadSummary> out;
  while (s.step()) out.push_back(read_summary(s));
  return out;
}

std::optional<WorkloadDetail> TuningDb::show_workload(long long workload_id) {
  WorkloadDetail detail;
  {
    Statement s(db_, path_, summary_select("WHERE w.id = ?"));
    s.bind(1, workload_id);
    if (!s.step()) return std::nullopt;
    detail.summary = read_summary(s);
    detail.baseline = {s.text(17), s.real(14), s.real(18), s.real(19)};
  }
  Statement s(db_, path_, R"sql(
SELECT config_id, config, status, time_ms, rel_err, max_abs_err, message, updated_at FROM candidates
WHERE workload_id = ?
ORDER BY status = 'ok' DESC, CASE WHEN status = 'ok' THEN time_ms END, config_id)sql");
  s.bind(1, workload_id);
  while (s.step())
    detail.candidates.push_back({s.text(0), parse_stored_json(s.text(1)), s.text(2), s.real(3), s.real(4), s.real(5),
                                 s.text(6), s.text(7)});
  return detail;
}

}  // namespace fact
