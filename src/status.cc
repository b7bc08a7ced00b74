// Copyright 2026 The umemcg Authors. SPDX-License-Identifier: Apache-2.0

#include "umemcg/status.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace umemcg {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case StatusCode::kBusy:
      return "BUSY";
    case StatusCode::kNotFound:
      return "NOT_FOUND";
    case StatusCode::kAlreadyExists:
      return "ALREADY_EXISTS";
    case StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case StatusCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case StatusCode::kAgain:
      return "AGAIN";
    case StatusCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    case StatusCode::kOutOfRange:
      return "OUT_OF_RANGE";
    case StatusCode::kAddressInUse:
      return "ADDRESS_IN_USE";
    case StatusCode::kNameTooLong:
      return "NAME_TOO_LONG";
    case StatusCode::kTooBig:
      return "TOO_BIG";
    case StatusCode::kNoSuchProcess:
      return "NO_SUCH_PROCESS";
  }
  return "UNKNOWN";
}

int ErrnoOf(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 0;
    case StatusCode::kInvalidArgument:
      return EINVAL;
    case StatusCode::kBusy:
      return EBUSY;
    case StatusCode::kNotFound:
      return ENOENT;
    case StatusCode::kAlreadyExists:
      return EEXIST;
    case StatusCode::kFailedPrecondition:
      return ENODEV;
    case StatusCode::kResourceExhausted:
      return ENOMEM;
    case StatusCode::kAgain:
      return EAGAIN;
    case StatusCode::kPermissionDenied:
      return EACCES;
    case StatusCode::kOutOfRange:
      return ERANGE;
    case StatusCode::kAddressInUse:
      return EADDRINUSE;
    case StatusCode::kNameTooLong:
      return ENAMETOOLONG;
    case StatusCode::kTooBig:
      return E2BIG;
    case StatusCode::kNoSuchProcess:
      return ESRCH;
  }
  return EINVAL;
}

Status::Status(StatusCode code, std::string_view message) {
  if (code != StatusCode::kOk) {
    rep_ = std::make_unique<Rep>(Rep{code, std::string(message)});
  }
}

Status::Status(const Status& other)
    : rep_(other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) {
    rep_ = other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr;
  }
  return *this;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s = StatusCodeName(code());
  if (!rep_->message.empty()) {
    s += ": ";
    s += rep_->message;
  }
  return s;
}

namespace internal {

void CheckFailed(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "umemcg: check failed: %s at %s:%d\n", expr, file, line);
  std::abort();
}

}  // namespace internal
}  // namespace umemcg
