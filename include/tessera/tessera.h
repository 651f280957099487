// Umbrella header: everything a C++ user of Tessera needs.
#pragma once

#include "tessera/numerics/block_scaled.h"
#include "tessera/numerics/convert.h"
#include "tessera/numerics/dtype.h"
#include "tessera/numerics/philox.h"
#include "tessera/numerics/policy.h"
#include "tessera/runtime/system_info.h"
#include "tessera/support/error.h"
#include "tessera/version.h"
