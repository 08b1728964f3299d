/* ckptconv reshard IN OUT --tp N --pp M [--vpp K]: a Megatron-LM checkpoint or a PaddleNLP
 * directory at another parallel layout, optimizer state included, written as one plan. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <ckpt/framework.h>
#include <ckpt/sys/common.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

typedef struct reshard_args {
    const char *in, *out, *strategy;
    ckpt_megatron_target target;
    int64_t iteration, true_vocab;
    int tp_set, pp_set, vpp_set;
    int to_dist; /* --to torch_dist */
    const char *optimizer_option; /* the option that set target.optimizer */
    cli_plan_args p;
} reshard_args;

static void reshard_help(FILE *out)
{
    fprintf(out,
"usage: ckptconv reshard IN OUT --tp N --pp M [--vpp K] [options]\n"
"\n"
"Write a Megatron-LM checkpoint (--ckpt-format torch) or a PaddleNLP checkpoint\n"
"directory at another tensor/pipeline-parallel layout, offline, on a CPU, streaming:\n"
"the checkpoint a run with the new TP and PP sizes resumes from.\n"
"\n"
"PaddleNLP (IN holds model_state[.tpXX][_ppYY][_shardZZ].pdparams, optimizer[.tpXX]\n"
"[_ppYY][_shardZZ].pdopt and config.json, or a unified checkpoint: model-0000i-of-0000n.\n"
"safetensors with PaddleNLP's names): every rank is merged through PaddleNLP's TP rules\n"
"(formats/maps/paddlenlp_llama.json: q/k/v, gate/up and lm_head column-parallel on\n"
"the last axis, o/down row-parallel, gate_up_fused_proj as [gate_r | up_r] per rank,\n"
"embeddings by vocabulary, k/v and the vocabulary whole on every rank where TP does\n"
"not divide them, norms replicated) and cut again; pipeline stages hold global layer\n"
"indices and are cut as PaddleNLP's pipeline model cuts them (equal shares of the\n"
"layers when PP divides them, else SegmentLayers \"uniform\" over embedding, layers,\n"
"norm and head). The .pdopt files are resharded with their parameters: Adam moments (also\n"
"<var>_fp32_master_0_moment1_0 with AMP O2), beta powers, master_weights and\n"
"LR_Scheduler, in Paddle's order. Sharding stage 1 files (optimizer.*_shardZZ.pdopt;\n"
"with save_sharded_model model_state.*_shardZZ.pdparams and model_meta.json) of one rank\n"
"are merged into one; parameters a sharded save left out come back from their master\n"
"weights cast to bfloat16, as PaddleNLP rebuilds them.\n"
"Transformer Engine layers (pd2te's output) reshard too: layernorm_qkv as [q_r | k_r |\n"
"v_r] per rank, fc1_weight as [gate_r | up_r].\n"
"Files are named as PaddleNLP's trainer names them, each with its name table; variable\n"
"names (name tables, .pdopt keys) are those each target rank's process gives its\n"
"parameters (every pipeline stage counts from linear_0.w_0); config.json gets\n"
"tensor_parallel_degree (and the pipeline model's architecture at PP > 1); other files\n"
"are copied.\n"
"\n"
"Megatron-LM:\n"
"IN is a checkpoint root (latest_checkpointed_iteration.txt, iter_NNNNNNN/ or release/,\n"
"mp_rank_TT[_PPP][_EEE]/model_optim_rng.pt) or one iteration directory. Its rank files\n"
"are read as one model at full shapes with global layer numbers, lazily, through the\n"
"built-in megatron_gpt layout rules (formats/maps/megatron_gpt.json): column- and\n"
"row-parallel weights, the fused QKV cut contiguously per query group (also with fewer\n"
"groups than ranks), SwiGLU linear_fc1 as [gate_r; up_r] per rank, vocabulary tables,\n"
"replicated norms and biases, TE and local layer names, learned position embeddings,\n"
"QK layernorm, tied or untied output layers (tied + PP > 1: the last stage's copy).\n"
"IN may also be a --ckpt-format torch_dist checkpoint (iter_NNNNNNN/.metadata, *.distcp,\n"
"common.pt; megatron-core's default): its tensors are read at their global shapes from the\n"
"chunks of every rank, whatever layout wrote them, and written here in the legacy layout.\n"
"Its optimizer state (the non-distributed optimizer's, or the distributed optimizer's\n"
"fully_reshardable or dp_reshardable form, each parameter's range in the buckets taken\n"
"from the buffer layout its args give and checked against the per-bucket numel objects;\n"
"megatron-core 0.13's fully_sharded_model_space and dp_zero_gather_scatter too)\n"
"is read per parameter; it is written with --to torch_dist in any form, and in the\n"
"legacy layout as distrib_optim.pt (a non-distributed optimizer's as the kind\n"
"--to-optimizer plain|distributed names). A form not read fails only a reshard that\n"
"keeps the optimizer: --no-optimizer writes the model.\n"
"\n"
"OUT gets Megatron's layout for the new sizes: the tracker, iter_NNNNNNN/mp_rank_TT[_PPP]/\n"
"model_optim_rng.pt, `iteration` and `checkpoint_version` kept, `args` rewritten\n"
"(tensor_model_parallel_size, pipeline_model_parallel_size,\n"
"virtual_pipeline_model_parallel_size, padded_vocab_size). The vocabulary is padded to\n"
"Megatron's rule (a multiple of make_vocab_size_divisible_by x TP) or --padded-vocab-size:\n"
"new padding rows are zeros, and only padding rows are ever cut. Padding only aligns the\n"
"table, so --padded-vocab-size is at least the true vocabulary and at most twice it (or\n"
"Megatron's rule, when that is more); anything else is refused before a file is written.\n"
"\n"
"Optimizer state (the non-distributed optimizer's Adam moments and fp32 master copies in\n"
"model_optim_rng.pt) is resharded with its parameters, in the order Megatron builds its\n"
"param groups. A distributed optimizer's (--use-distributed-optimizer) is too: each rank's\n"
"distrib_optim.pt holds, per grad buffer, the flat fp32 masters and Adam moments of its\n"
"parameters where megatron-core's buffer layout puts them (reverse parameter order,\n"
"64-element starts, buckets of --ddp-bucket-size with --overlap-grad-reduce, the tied\n"
"embedding in a bucket of its own, bucket ends padded to lcm(DP, 128)); every file is\n"
"checked against that layout, each parameter's state is cut out, merged and split like\n"
"the parameter, and laid out again for the target's buffers at --dp N (the DP the run\n"
"resumes with: it decides the padding, so give it when DP changes; args'\n"
"data_parallel_size follows). model_optim_rng.pt keeps the optimizer's param groups and\n"
"step. Megatron itself only changes DP for this state. A MoE model's state (the chained\n"
"optimizer's [dense, expert] lists, distributed or not) follows its experts to another\n"
"EP and expert TP. Not yet: the pre-2024 per-bucket distrib_optim.pt (load and save it\n"
"once with --ckpt-convert-update-legacy-dist-opt-format).\n"
"--to-optimizer plain|distributed converts between the two kinds, since runs switch\n"
"between them: plain writes the state as the non-distributed optimizer saves it\n"
"(per-parameter step, exp_avg, exp_avg_sq in param-group order, fp32_from_fp16_params\n"
"for bf16/fp16 models), distributed writes distrib_optim.pt as above (and\n"
"model_optim_rng.pt's param groups with the common step), both from each parameter's\n"
"fp32 master and moments, whichever kind the input used; args.use_distributed_optimizer\n"
"is set to match.\n"
"rng states stay per rank where the rank exists in both layouts; a new rank gets the\n"
"state of the source rank at its coordinates, each one past the source's sizes taken as\n"
"0. _extra_state entries are copied from the first source rank of their stage\n"
"(--extra-state empty writes empty uint8 tensors, TE >= 2.0's \"no FP8 state\"; drop\n"
"leaves them out: a Transformer Engine model then fails megatron-core's dist load of\n"
"a torch_dist output, which asks for every one of them).\n"
"Mixture-of-experts models: the rank files of EP rank r (mp_rank_TT[_PPP]_EEE) hold\n"
"num_experts / EP experts of each MoE layer as their local experts 0.., which are\n"
"global experts r * num_experts / EP + i; the model names them by their global index\n"
"(inspect shows it), and --ep N gives each target EP rank the experts it owns under\n"
"their local indices again, in Megatron's order, args.expert_model_parallel_size\n"
"rewritten. Every EP rank file must hold its experts and the same dense tensors.\n"
"A distributed optimizer's expert state (the chained optimizer's second buffers, over\n"
"the expert data-parallel group DP x TP / (expert TP x EP)) follows its experts; the\n"
"target's --dp must leave that group whole (EP 4 at DP 2 needs --dp 4).\n"
"\n"
"Nothing appears under OUT unless every file was written and synced; a non-empty OUT\n"
"needs --force.\n"
"\n"
"options:\n"
"  --tp N, --pp M           target tensor- and pipeline-parallel sizes (default: the\n"
"                           run's; a torch_dist IN, stored at global shapes: the TP and\n"
"                           PP its args name)\n"
"  --vpp K                  virtual pipeline chunks per stage (default: the run's when\n"
"                           --pp is not given, else 1; Megatron)\n"
CLI_SPLIT_HELP
"  --ep N                   expert-parallel size of a mixture of experts (default: the\n"
"                           input's); num_experts must be a multiple of it. The\n"
"                           distributed optimizer's state moves with the experts in\n"
"                           the legacy layout (at EP 1 the experts are dense\n"
"                           parameters; EP 1 -> N gives them the expert optimizer,\n"
"                           their dense param group); torch_dist output at another\n"
"                           EP with --optim-format fully_reshardable or --no-optimizer\n"
"  --etp M                  expert tensor-parallel size (default: the TP), dividing the\n"
"                           TP: the experts are cut over M ranks, and the files are\n"
"                           those Megatron's expert data-parallel rank 0 writes, one per\n"
"                           (its dense TP rank, EP rank): with --tp 2 --ep 2 --etp 1\n"
"                           mp_rank_00_000 and mp_rank_01_001, each with whole experts\n"
"                           (legacy output; such a set is read as a source too; expert\n"
"                           TP above the TP, or expert TP x EP below it, is refused:\n"
"                           Megatron's legacy save loses ranks there)\n"
"  --moe-grouped-gemm on|off on: the experts as Megatron's --moe-grouped-gemm holds them,\n"
"                           by args.transformer_impl. transformer_engine: TEGroupedMLP,\n"
"                           per layer experts.linear_fc1.weight<i> (local expert i's\n"
"                           SequentialMLP weight) .., one linear_fc1._extra_state (FP8\n"
"                           state is not split or merged: --extra-state empty or drop),\n"
"                           then linear_fc2's. local: GroupedMLP, per layer\n"
"                           experts.weight1 [hidden, local experts x fc1 rows\n"
"                           / TP], whose view(local, hidden, -1)[i] is expert i's\n"
"                           linear_fc1.weight TRANSPOSED, and experts.weight2\n"
"                           [local experts x fc2 columns / TP, hidden], the fc2 weights\n"
"                           transposed one after the other. Model only (--no-optimizer).\n"
"                           off: SequentialMLP's local_experts.<i>.linear_fc1/2 (a\n"
"                           grouped input is read as such). Default: the input's\n"
"  --dp N                   data-parallel size the target runs with (default: the\n"
"                           input's args.data_parallel_size): the distributed\n"
"                           optimizer's buffers are padded for it (Megatron)\n"
"  --ddp-bucket-size N|none the grad buffer buckets the target runs with: N elements\n"
"                           (--overlap-grad-reduce --ddp-bucket-size N) or none (no\n"
"                           --overlap-grad-reduce); they move the distributed optimizer's\n"
"                           state, so give them when they change (default: the input's;\n"
"                           args follow; Megatron)\n"
"  --num-distributed-optimizer-instances N\n"
"                           the optimizer instances the target runs with: its buffers\n"
"                           are padded and sharded for DP / N (default: the input's;\n"
"                           args follow; Megatron)\n"
"  --strategy FILE          the target from a Galvatron-style strategy JSON\n"
"                           ({\"pp_size\": M, \"tp_size_list\": [N, N, ...]}, uniform TP;\n"
"                           dp_size_list and other fields are not used)\n"
"  --iteration I            read iter_I instead of the one the tracker names (Megatron)\n"
"  --padded-vocab-size V    vocabulary rows in the output instead of Megatron's rule\n"
"  --true-vocab-size V      rows that are not padding, when args do not say (Megatron)\n"
"  --no-optimizer           write the model, args, iteration and rng state only\n"
"                           (PaddleNLP: the model files and config.json only)\n"
"  --to-optimizer KIND      keep (default), none, plain or distributed: the kind of optimizer\n"
"                           whose state is written (plain: the non-distributed optimizer's,\n"
"                           in model_optim_rng.pt; distributed: distrib_optim.pt); Megatron\n"
"  --to-distributed-optimizer  the same as --to-optimizer distributed\n"
"  --extra-state MODE       copy (default), empty or drop (Megatron)\n"
"  --to FORMAT              torch (default: the legacy layout above) or torch_dist: the\n"
"                           iteration as megatron-core's dist_checkpointing saves it\n"
"                           (.metadata, one data file per rank of the target layout,\n"
"                           common.pt, metadata.json), which Megatron loads at any TP/PP;\n"
"                           optimizer state of a torch_dist IN or of a legacy\n"
"                           distributed optimizer (distrib_optim.pt; a legacy\n"
"                           non-distributed one: not yet, --no-optimizer); rng state\n"
"                           and TE FP8 state not written (load with --no-load-rng)\n"
"  --optim-format F         torch_dist: the distributed optimizer's state as F:\n"
"                           dp_reshardable (Megatron's default: per grad buffer bucket,\n"
"                           laid out for the target's TP/PP/VPP and --dp) or\n"
"                           fully_reshardable (per parameter; megatron-core loads it at\n"
"                           any TP/PP/DP); default: the IN's torch_dist form, else\n"
"                           dp_reshardable. A non-distributed optimizer's state (fp32\n"
"                           masters, Adam moments) becomes the distributed optimizer's.\n"
"                           megatron-core before Megatron-LM PR #5077 saved\n"
"                           fully_reshardable state at the wrong offsets in grad buffers\n"
"                           of several buckets whose inner buckets are padded: such an\n"
"                           IN is refused when a parameter it would have moved has a\n"
"                           saved master that is not its weight (rounded for bf16/fp16);\n"
"                           a right one (ckptconv's, or a megatron-core with the fix) is\n"
"                           read. The loader never had the defect: fully_reshardable is\n"
"                           written for any layout\n"
"  --dry-run                print every output file and tensor with its sources; write nothing\n"
"  --json                   one JSON report on stdout (also with --dry-run)\n"
"  --drop PATTERN           leave out the input tensors PATTERN matches (a glob over\n"
"                           the whole name; repeatable; Megatron torch format and\n"
"                           PaddleNLP); a tensor no layout rule takes is an error\n"
"                           unless dropped. The report lists them; a parameter dropped\n"
"                           (PaddleNLP: one with optimizer state) needs --no-optimizer\n"
"  --memory SIZE            working-memory budget (default 512M)\n"
"  --threads N              worker threads (default: all cores)\n"
"  --force                  write into a non-empty OUT\n"
"  -q, --quiet              no progress or summary\n"
"  -h, --help               this text\n"
"\n"
"examples:\n"
"  ckptconv reshard ckpt/ ckpt-tp4/ --tp 4 --pp 1\n"
"  ckptconv reshard ckpt/ ckpt-pp4-vpp2/ --tp 2 --pp 4 --vpp 2 --dry-run\n"
"  ckptconv reshard ckpt/iter_0005000 out/ --tp 1 --pp 1 --no-optimizer\n"
"  ckptconv reshard ckpt/ ckpt-tp4-dp2/ --tp 4 --pp 1 --dp 2   # distrib_optim.pt too\n"
"  ckptconv reshard ckpt/ ckpt-plain/ --to-optimizer plain   # non-distributed optimizer\n"
"  ckptconv reshard paddle-pp4/ paddle-tp2pp2/ --tp 2 --pp 2   # PaddleNLP, .pdopt too\n");
}

/* Galvatron's strategy files (ckpt_megatron_strategy_read). */
static int read_strategy(reshard_args *a)
{
    if (ckpt_megatron_strategy_read(&a->target.tp, &a->target.pp, a->strategy) < 0)
        return ckpt_error_last()->klass == CKPT_ERRCLASS_OS
                   ? cli_usage_error("reshard", "cannot read --strategy %s", a->strategy)
                   : cli_usage_error("reshard", "%s", ckpt_error_last()->message);
    a->tp_set = a->pp_set = 1;
    return 0;
}

/* --no-optimizer, --to-optimizer KIND, --to-distributed-optimizer: one of them, once. */
static int optimizer_option(const char *option, const char *kind, reshard_args *a)
{
    static const char *const kinds[] = { "keep", "none", "plain", "distributed" };
    size_t k;

    if (a->optimizer_option)
        return cli_usage_error("reshard", "%s and %s both say what to do with the optimizer state", a->optimizer_option,
                               option);
    a->optimizer_option = option;
    for (k = 0; k < sizeof kinds / sizeof *kinds; k++)
        if (strcmp(kind, kinds[k]) == 0) {
            a->target.optimizer = (ckpt_megatron_optimizer)k;
            return 0;
        }
    return cli_usage_error("reshard", "--to-optimizer is keep, none, plain or distributed, not '%s'", kind);
}

static int parse_args(int argc, char **argv, reshard_args *a)
{
    enum {
        O_TP = 256, O_PP, O_VPP, O_STRATEGY, O_ITER, O_PADDED, O_TRUE, O_NOOPT, O_EXTRA, O_TO, O_TO_OPTIM, O_TO_DOPT,
        O_DP, O_BUCKET, O_OPTIM_FORMAT, O_INSTANCES, O_EP, O_ETP, O_GROUPED
    };
    static const struct option longopts[] = {
        { "tp", required_argument, NULL, O_TP }, { "pp", required_argument, NULL, O_PP },
        { "vpp", required_argument, NULL, O_VPP }, { "strategy", required_argument, NULL, O_STRATEGY },
        { "iteration", required_argument, NULL, O_ITER }, { "padded-vocab-size", required_argument, NULL, O_PADDED },
        { "true-vocab-size", required_argument, NULL, O_TRUE }, { "no-optimizer", no_argument, NULL, O_NOOPT },
        { "extra-state", required_argument, NULL, O_EXTRA }, { "to", required_argument, NULL, O_TO },
        { "to-optimizer", required_argument, NULL, O_TO_OPTIM },
        { "to-distributed-optimizer", no_argument, NULL, O_TO_DOPT },
        { "dp", required_argument, NULL, O_DP }, { "ddp-bucket-size", required_argument, NULL, O_BUCKET },
        { "ep", required_argument, NULL, O_EP }, { "etp", required_argument, NULL, O_ETP },
        { "moe-grouped-gemm", required_argument, NULL, O_GROUPED },
        { "num-distributed-optimizer-instances", required_argument, NULL, O_INSTANCES },
        { "optim-format", required_argument, NULL, O_OPTIM_FORMAT }, CLI_PLAN_LONGOPTS, CLI_SPLIT_LONGOPTS,
        { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 }
    };
    long long v = 0;
    int c, rc;

    optind = 1;
    while ((c = getopt_long(argc, argv, "qh", longopts, NULL)) != -1) {
        rc = 0;
        switch (c) {
        case O_TP:
            rc = cli_option_parallel("reshard", "--tp", optarg, &a->target.tp);
            a->tp_set = 1;
            break;
        case O_PP:
            rc = cli_option_parallel("reshard", "--pp", optarg, &a->target.pp);
            a->pp_set = 1;
            break;
        case O_VPP:
            rc = cli_option_parallel("reshard", "--vpp", optarg, &a->target.vpp);
            a->vpp_set = 1;
            break;
        case O_DP: rc = cli_option_parallel("reshard", "--dp", optarg, &a->target.dp); break;
        case O_EP: rc = cli_option_parallel("reshard", "--ep", optarg, &a->target.ep); break;
        case O_ETP: rc = cli_option_parallel("reshard", "--etp", optarg, &a->target.etp); break;
        case O_GROUPED:
            if (strcmp(optarg, "on") != 0 && strcmp(optarg, "off") != 0)
                return cli_usage_error("reshard", "--moe-grouped-gemm is on or off, not '%s'", optarg);
            a->target.moe_grouped_gemm = strcmp(optarg, "on") == 0 ? 1 : -1;
            break;
        case O_INSTANCES:
            rc = cli_option_parallel("reshard", "--num-distributed-optimizer-instances", optarg,
                                     &a->target.dist_opt_instances);
            break;
        case O_BUCKET:
            if (strcmp(optarg, "none") == 0) {
                a->target.ddp_bucket_size = CKPT_MEGATRON_NO_BUCKETS;
            } else {
                rc = cli_option_int("reshard", "--ddp-bucket-size", optarg, 1, LLONG_MAX, &v);
                a->target.ddp_bucket_size = v;
            }
            break;
        case O_STRATEGY: a->strategy = optarg; break;
        case O_ITER: rc = cli_option_int("reshard", "--iteration", optarg, 0, LLONG_MAX, &v); a->iteration = v; break;
        case O_PADDED:
            rc = cli_option_int("reshard", "--padded-vocab-size", optarg, 1, INT_MAX, &v);
            a->target.padded_vocab_size = v;
            break;
        case O_TRUE: rc = cli_option_int("reshard", "--true-vocab-size", optarg, 1, INT_MAX, &v); a->true_vocab = v; break;
        case O_NOOPT:
        case O_TO_DOPT:
        case O_TO_OPTIM:
            rc = optimizer_option(c == O_NOOPT ? "--no-optimizer" : c == O_TO_DOPT ? "--to-distributed-optimizer"
                                                                                 : "--to-optimizer",
                                  c == O_NOOPT ? "none" : c == O_TO_DOPT ? "distributed" : optarg, a);
            break;
        case O_EXTRA:
            if (strcmp(optarg, "copy") == 0)
                a->target.extra_state = CKPT_MEGATRON_EXTRA_COPY;
            else if (strcmp(optarg, "empty") == 0)
                a->target.extra_state = CKPT_MEGATRON_EXTRA_EMPTY;
            else if (strcmp(optarg, "drop") == 0)
                a->target.extra_state = CKPT_MEGATRON_EXTRA_DROP;
            else
                rc = cli_usage_error("reshard", "--extra-state is copy, empty or drop, not '%s'", optarg);
            break;
        case O_TO:
            if (strcmp(optarg, "torch") == 0 || strcmp(optarg, "torch_dist") == 0)
                a->to_dist = strcmp(optarg, "torch_dist") == 0;
            else
                rc = cli_usage_error("reshard", "--to is torch or torch_dist, not '%s'", optarg);
            break;
        case O_OPTIM_FORMAT:
            if (strcmp(optarg, "dp_reshardable") == 0)
                a->target.sharding = CKPT_MEGATRON_SHARDING_DP_RESHARDABLE;
            else if (strcmp(optarg, "fully_reshardable") == 0)
                a->target.sharding = CKPT_MEGATRON_SHARDING_FULLY_RESHARDABLE;
            else
                rc = cli_usage_error("reshard", "--optim-format is dp_reshardable or fully_reshardable, not '%s'",
                                     optarg);
            break;
        case 'h': reshard_help(stdout); return -1;
        default:
            if ((rc = cli_split_option("reshard", c, optarg, &a->target)) < 0 &&
                (rc = cli_plan_option("reshard", c, optarg, &a->p)) < 0)
                return cli_usage_error("reshard", "unknown option");
        }
        if (rc)
            return rc;
    }
    if (argc - optind != 2)
        return cli_usage_error("reshard", "expected IN and OUT, got %d argument(s)", argc - optind);
    a->in = argv[optind];
    a->out = argv[optind + 1];
    return a->strategy ? read_strategy(a) : 0;
}

/* The data-parallel size the input's args record (0 when they do not), and the target's. */
static int64_t source_dp(const ckpt_megatron *m)
{
    const ckpt_value *v = ckpt_megatron_arg(ckpt_megatron_args(m), "data_parallel_size");
    return v && v->kind == CKPT_VAL_INT ? v->u.integer : 0;
}

static int64_t target_dp(const reshard_args *a, const ckpt_megatron *m)
{
    return a->target.dp ? a->target.dp : source_dp(m);
}

static int print_json(const reshard_args *a, const ckpt_megatron *m, const ckpt_plan *plan,
                       const ckpt_plan_report *rep, double seconds)
{
    const ckpt_megatron_info *in = ckpt_megatron_info_of(m);
    cJSON *o = cJSON_CreateObject();

    cJSON_AddStringToObject(o, "command", "reshard");
    cJSON_AddStringToObject(o, "input", a->in);
    cJSON_AddStringToObject(o, "output", a->out);
    cJSON *from = cJSON_AddObjectToObject(o, "from"), *to = cJSON_AddObjectToObject(o, "to");
    cJSON_AddNumberToObject(from, "tp", in->run_tp);
    cJSON_AddNumberToObject(from, "pp", in->run_pp);
    cJSON_AddNumberToObject(from, "vpp", in->run_vpp);
    cJSON_AddNumberToObject(from, "ep", in->ep);
    cJSON_AddNumberToObject(from, "dp", (double)source_dp(m));
    cJSON_AddNumberToObject(from, "padded_vocab_size", (double)in->padded_vocab_size);
    cJSON_AddNumberToObject(to, "tp", a->target.tp);
    cJSON_AddNumberToObject(to, "pp", a->target.pp);
    cJSON_AddNumberToObject(to, "vpp", a->target.vpp);
    cJSON_AddNumberToObject(to, "ep", a->target.ep);
    cJSON_AddNumberToObject(to, "dp", (double)target_dp(a, m));
    cJSON_AddStringToObject(to, "format", a->to_dist ? "torch_dist" : "torch");
    cJSON_AddNumberToObject(o, "num_layers", (double)in->num_layers);
    cJSON_AddNumberToObject(o, "iteration", (double)in->iteration);
    cJSON_AddBoolToObject(o, "optimizer", in->has_optimizer && a->target.optimizer != CKPT_MEGATRON_OPTIM_DROP);
    if (in->has_optimizer && a->target.optimizer != CKPT_MEGATRON_OPTIM_DROP)
        cJSON_AddStringToObject(o, "optimizer_kind",
                                a->target.optimizer == CKPT_MEGATRON_OPTIM_PLAIN         ? "plain"
                                : a->target.optimizer == CKPT_MEGATRON_OPTIM_DISTRIBUTED ? "distributed"
                                : in->distributed_optimizer                              ? "distributed"
                                                                                         : "plain");
    cJSON_AddBoolToObject(o, "distributed_optimizer", in->distributed_optimizer);
    return cli_plan_report(o, plan, a->p.dry_run ? NULL : rep, seconds);
}

static int run_paddle(const reshard_args *a)
{
    cli_reshard_job j;
    const char *megatron_only = a->target.vpp > 1                  ? "--vpp"
                                : a->target.first_stage_layers || a->target.last_stage_layers ||
                                          a->target.account_for_embedding || a->target.account_for_loss
                                    ? "an uneven pipeline split"
                                : a->target.dp                      ? "--dp"
                                : a->target.ep                      ? "--ep"
                                : a->target.etp                     ? "--etp"
                                : a->target.moe_grouped_gemm        ? "--moe-grouped-gemm"
                                : a->target.ddp_bucket_size         ? "--ddp-bucket-size"
                                : a->target.dist_opt_instances      ? "--num-distributed-optimizer-instances"
                                : a->to_dist                        ? "--to torch_dist"
                                : a->target.padded_vocab_size       ? "--padded-vocab-size"
                                : a->true_vocab                     ? "--true-vocab-size"
                                : a->iteration >= 0                 ? "--iteration"
                                : a->target.extra_state != CKPT_MEGATRON_EXTRA_COPY ? "--extra-state"
                                : a->target.optimizer == CKPT_MEGATRON_OPTIM_PLAIN ||
                                          a->target.optimizer == CKPT_MEGATRON_OPTIM_DISTRIBUTED
                                    ? a->optimizer_option
                                                                    : NULL;

    if (megatron_only)
        return cli_usage_error("reshard", "%s is a PaddleNLP directory; %s applies to Megatron checkpoints only", a->in,
                               megatron_only);
    memset(&j, 0, sizeof j);
    j.in = a->in;
    j.out = a->out;
    j.tp = a->target.tp;
    j.pp = a->target.pp;
    j.tp_set = a->tp_set;
    j.pp_set = a->pp_set;
    j.no_optimizer = a->target.optimizer == CKPT_MEGATRON_OPTIM_DROP;
    j.p = &a->p;
    return cli_reshard_paddle(&j);
}

/* The job: the Megatron framework at the same framework, the target's sizes those given (the
 * source's otherwise: a torch_dist IN's run layout, its virtual stages with its stages). */
static int plan_megatron(reshard_args *a, ckpt_plan *plan, ckpt_fw **src)
{
    ckpt_job_options jo = CKPT_JOB_OPTIONS_INIT;
    const ckpt_megatron_info *info;
    int rc;

    jo.from.framework = "megatron";
    jo.from.iteration = a->iteration;
    jo.from.true_vocab_size = a->true_vocab;
    jo.target.megatron = a->target;
    jo.target.tp = a->tp_set ? a->target.tp : 0;
    jo.target.pp = a->pp_set ? a->target.pp : 0;
    jo.target.vpp = a->vpp_set ? a->target.vpp : a->pp_set ? 1 : 0;
    jo.target.format = a->to_dist ? "torch_dist" : "torch";
    jo.target.ep = a->target.ep;
    jo.target.etp = a->target.etp;
    if ((rc = ckpt_job_plan(plan, a->in, &jo, src)) < 0)
        return rc;
    info = ckpt_megatron_info_of(ckpt_fw_native(*src, "megatron"));
    a->target.tp = jo.target.tp ? jo.target.tp : info->run_tp;
    a->target.pp = jo.target.pp ? jo.target.pp : info->run_pp;
    a->target.vpp = jo.target.vpp ? jo.target.vpp : info->run_vpp;
    a->target.ep = jo.target.ep ? jo.target.ep : info->ep;
    return 0;
}

static int run(reshard_args *a)
{
    ckpt_set_options so = CKPT_SET_OPTIONS_INIT;
    ckpt_plan_report rep;
    ckpt_set *set = NULL;
    ckpt_plan *plan = NULL;
    ckpt_fw *src = NULL;
    const ckpt_megatron *m;
    const ckpt_megatron_info *info;
    double start = cli_now();
    int rc, paddle;

    memset(&rep, 0, sizeof rep);
    so.iteration = a->iteration;
    if ((rc = ckpt_outdir_check_apart(a->out, a->in)) < 0)
        goto done;
    /* whichever layout claims IN; anything but a PaddleNLP directory is read as Megatron's,
       and a PaddleNLP directory that does not open says why */
    paddle = ckpt_paddle_is_dir(a->in);
    if ((rc = ckpt_set_open(&set, a->in, &so)) == 0 && strcmp(ckpt_set_info_of(set)->layout, "paddle") == 0) {
        ckpt_set_close(set);
        set = NULL;
        rc = run_paddle(a);
        goto done;
    }
    if (rc < 0 && paddle)
        goto done;
    ckpt_error_clear();
    ckpt_set_close(set);
    set = NULL;
    if ((rc = ckpt_plan_new(&plan)) < 0 || (rc = cli_plan_drop_option(plan, &a->p)) < 0 ||
        (rc = plan_megatron(a, plan, &src)) < 0)
        goto done;
    m = ckpt_fw_native(src, "megatron");
    info = ckpt_megatron_info_of(m);
    if (a->p.dry_run && a->p.json) {
        rc = print_json(a, m, plan, &rep, 0);
        goto done;
    }
    if (a->p.dry_run) {
        char summary[512];
        snprintf(summary, sizeof summary, "reshard %s (TP %d, PP %d, VPP %d) -> %s (TP %d, PP %d, VPP %d)", a->in,
                 info->run_tp, info->run_pp, info->run_vpp, a->out, a->target.tp, a->target.pp, a->target.vpp);
        rc = cli_plan_dry_run(plan, summary);
        goto done;
    }
    if ((rc = cli_plan_execute("reshard", plan, a->out, &a->p, &rep)) < 0)
        goto done;
    if (a->p.json) {
        rc = print_json(a, m, plan, &rep, cli_now() - start);
    } else if (!a->p.quiet) {
        char size[32];
        cli_plan_print_dropped(plan, &a->p);
        char dp[64] = "", ep[48] = "";
        if (info->ep > 1 || a->target.ep > 1)
            snprintf(ep, sizeof ep, ", EP %d -> %d", info->ep, a->target.ep);
        if ((info->distributed_optimizer && a->target.optimizer == CKPT_MEGATRON_OPTIM_KEEP) ||
            a->target.optimizer == CKPT_MEGATRON_OPTIM_DISTRIBUTED)
            snprintf(dp, sizeof dp, " (distributed optimizer, DP %lld -> %lld)", (long long)source_dp(m),
                     (long long)target_dp(a, m));
        fprintf(stderr, "wrote %s: TP %d, PP %d, VPP %d -> TP %d, PP %d, VPP %d%s%s%s, %zu files, %s%s in %.2f s\n",
                a->out, info->run_tp, info->run_pp, info->run_vpp, a->target.tp, a->target.pp, a->target.vpp, ep,
                a->to_dist ? " (torch_dist)" : "", dp, rep.files,
                cli_human_size(rep.bytes_written, size, sizeof size),
                !info->has_optimizer || a->target.optimizer == CKPT_MEGATRON_OPTIM_DROP ? ""
                : a->target.optimizer == CKPT_MEGATRON_OPTIM_PLAIN ? ", optimizer state resharded (non-distributed)"
                : a->target.optimizer == CKPT_MEGATRON_OPTIM_DISTRIBUTED ? ", optimizer state resharded (distributed)"
                                                                          : ", optimizer state resharded",
                cli_now() - start);
    }
done:
    ckpt_plan_report_dispose(&rep);
    ckpt_fw_close(src);
    ckpt_plan_free(plan);
    ckpt_set_close(set);
    if (rc > 0)
        return rc;
    return rc < 0 ? cli_fail("reshard") : CLI_EXIT_OK;
}

int cli_reshard(int argc, char **argv)
{
    ckpt_megatron_target target = CKPT_MEGATRON_TARGET_INIT;
    ckpt_convert_options write = CKPT_CONVERT_OPTIONS_INIT;
    reshard_args a;
    int rc;

    memset(&a, 0, sizeof a);
    a.target = target;
    a.p.write = write;
    a.iteration = -1;
    rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? CLI_EXIT_OK : rc;
    return run(&a);
}
