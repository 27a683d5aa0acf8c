// posenc/posenc.h: everything.
#pragma once
#include "posenc/absolute.h"
#include "posenc/attention.h"
#include "posenc/kv_cache.h"
#include "posenc/mrope_positions.h"
#include "posenc/bias.h"
#include "posenc/encodings.h"
#include "posenc/error.h"
#include "posenc/rope.h"
#include "posenc/shaw.h"
#include "posenc/tensor.h"
#include "posenc/threads.h"
#include "posenc/transformer_xl.h"
