/* ckptconv: read, convert and verify large-model training checkpoints. */
#ifndef CKPT_H
#define CKPT_H

#include "ckpt/common.h"
#include "ckpt/error.h"
#include "ckpt/buf.h"
#include "ckpt/dtype.h"
#include "ckpt/tensor.h"
#include "ckpt/value.h"
#include "ckpt/checkpoint.h"
#include "ckpt/graph.h"
#include "ckpt/rules.h"
#include "ckpt/outdir.h"
#include "ckpt/shard.h"
#include "ckpt/parallel.h"
#include "ckpt/plan.h"
#include "ckpt/set.h"
#include "ckpt/paddle.h"
#include "ckpt/deepspeed.h"
#include "ckpt/megatron.h"
#include "ckpt/hf.h"
#include "ckpt/verify.h"
#include "ckpt/diff.h"

#endif
