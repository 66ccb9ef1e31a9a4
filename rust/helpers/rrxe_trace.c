// SPDX-License-Identifier: GPL-2.0
/*
 * Creates the rrxe tracepoints declared in rrxe_trace.h.  Kbuild puts this
 * directory on the include path, which define_trace.h needs to read the
 * header again (TRACE_INCLUDE_PATH is ".").
 */

#define CREATE_TRACE_POINTS
#include "rrxe_trace.h"
