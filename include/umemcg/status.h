// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0
//
// Status and StatusOr<T>: the error type for bad input and bad states (cf.
// leveldb/abseil Status). An expected outcome such as "the charge did not
// fit under max" is NOT a Status error: see ChargeResult in group.h.
//
// Codes map to the kernel's errno values where the cgroup-v2 file interface
// returns them (ErrnoOf): kInvalidArgument -> EINVAL, kBusy -> EBUSY,
// kNotFound -> ENOENT, kAlreadyExists -> EEXIST, kFailedPrecondition ->
// ENODEV, kResourceExhausted -> ENOMEM, kAgain -> EAGAIN, kPermissionDenied
// -> EACCES, kOutOfRange -> ERANGE, kNameTooLong -> ENAMETOOLONG (a group
// name over 255 bytes), kTooBig -> E2BIG (a file write over 4096 bytes),
// kNoSuchProcess -> ESRCH (a TID or PID written to cgroup.threads /
// cgroup.procs that names no registered thread of this process);
// the operator interfaces add kAddressInUse -> EADDRINUSE (a metrics port
// another socket holds).
//
// An OK Status holds no allocation. An error Status holds a heap-allocated
// message, so Status is never built on a charge or uncharge path (those
// return a StatusCode inside ChargeResult).
//
// Thread safety: a const Status may be read from many threads; mutation
// requires external synchronization, like any value type.

#ifndef UMEMCG_STATUS_H_
#define UMEMCG_STATUS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "umemcg/check.h"
#include "umemcg/export.h"

namespace umemcg {

enum class StatusCode : uint8_t {
  kOk = 0,
  kInvalidArgument = 1,
  kBusy = 2,
  kNotFound = 3,
  kAlreadyExists = 4,
  kFailedPrecondition = 5,
  kResourceExhausted = 6,
  kAgain = 7,
  kPermissionDenied = 8,
  kOutOfRange = 9,
  kAddressInUse = 10,
  kNameTooLong = 11,
  kTooBig = 12,
  kNoSuchProcess = 13,
};

// "OK", "INVALID_ARGUMENT", ...; never null.
UMEMCG_EXPORT const char* StatusCodeName(StatusCode code);
// The errno the kernel returns for this code (0 for kOk).
UMEMCG_EXPORT int ErrnoOf(StatusCode code);

class [[nodiscard]] UMEMCG_EXPORT Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string_view message);
  explicit Status(StatusCode code) : Status(code, {}) {}

  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status Ok() { return Status(); }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  // The message given at construction ("" when OK or none given).
  std::string_view message() const {
    return rep_ ? std::string_view(rep_->message) : std::string_view();
  }
  // "OK" or "<CODE>: <message>".
  std::string ToString() const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code() == b.code() && a.message() == b.message();
  }

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<Rep> rep_;
};

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  // REQUIRES: !status.ok().
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT
    UMEMCG_CHECK(!status_.ok());
  }
  StatusOr(T value) : value_(std::move(value)), has_value_(true) {}  // NOLINT

  bool ok() const { return has_value_; }
  const Status& status() const { return status_; }

  // REQUIRES: ok().
  T& value() & {
    UMEMCG_CHECK(has_value_);
    return value_;
  }
  const T& value() const& {
    UMEMCG_CHECK(has_value_);
    return value_;
  }
  T&& value() && {
    UMEMCG_CHECK(has_value_);
    return std::move(value_);
  }
  T* operator->() { return &value(); }
  T& operator*() & { return value(); }

 private:
  Status status_;
  T value_{};
  bool has_value_ = false;
};

}  // namespace umemcg

#endif  // UMEMCG_STATUS_H_
