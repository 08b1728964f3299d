# Writes a C file holding every built-in model family, formats/families/<name>.json, as bytes,
# in the order formats/families/index.json lists them (a listed name without a file is
# skipped). Run at build time:
#   cmake -DFAMILIES_DIR=<formats/families> -DOUT=<file.c> -P embed_families.cmake
# A family whose JSON does not parse, whose "name" is not its file name, or that the index
# does not list fails the build.
cmake_policy(VERSION 3.16)
if(NOT FAMILIES_DIR OR NOT OUT)
  message(FATAL_ERROR "embed_families.cmake needs -DFAMILIES_DIR=... and -DOUT=...")
endif()

file(READ ${FAMILIES_DIR}/index.json index)
string(JSON n_index ERROR_VARIABLE err LENGTH "${index}")
if(err)
  message(FATAL_ERROR "${FAMILIES_DIR}/index.json: ${err}")
endif()
set(listed "")
if(n_index GREATER 0)
  math(EXPR last "${n_index} - 1")
  foreach(i RANGE ${last})
    string(JSON name GET "${index}" ${i})
    list(APPEND listed "${name}")
  endforeach()
endif()

file(GLOB files ${FAMILIES_DIR}/*.json)
foreach(path ${files})
  get_filename_component(stem ${path} NAME_WLE)
  if(NOT stem STREQUAL "index" AND NOT stem IN_LIST listed)
    message(FATAL_ERROR "${path}: the family is not listed in ${FAMILIES_DIR}/index.json")
  endif()
endforeach()

# CMake's regular expressions have no {n}: spell out one line of 16 bytes.
string(REPEAT "0x[0-9a-f][0-9a-f]," 16 line_of_bytes)

set(arrays "")
set(entries "")
set(count 0)
foreach(stem ${listed})
  set(path ${FAMILIES_DIR}/${stem}.json)
  if(NOT EXISTS ${path})
    continue()
  endif()
  file(READ ${path} text)
  string(JSON name ERROR_VARIABLE err GET "${text}" name)
  if(err)
    message(FATAL_ERROR "${path}: ${err}")
  endif()
  if(NOT name STREQUAL stem)
    message(FATAL_ERROR "${path}: the family's \"name\" is \"${name}\"; it must be the file name, \"${stem}\"")
  endif()
  if(NOT name MATCHES "^[A-Za-z0-9_]+$")
    message(FATAL_ERROR "${path}: family name \"${name}\" may hold only letters, digits and '_'")
  endif()
  file(READ ${path} hex HEX)
  string(LENGTH "${hex}" hex_len)
  math(EXPR len "${hex_len} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(REGEX REPLACE "(${line_of_bytes})" "\\1\n    " bytes "${bytes}")
  string(APPEND arrays "/* ${stem}.json */\nstatic const unsigned char family_${count}[] = {\n    ${bytes}0x00\n};\n\n")
  string(APPEND entries "    { \"${name}\", (const char *)family_${count}, ${len} },\n")
  math(EXPR count "${count} + 1")
endforeach()

if(count EQUAL 0)
  set(entries "    { NULL, NULL, 0 },\n")
endif()

file(WRITE ${OUT}
"/* Generated at build time by cmake/embed_families.cmake from formats/families; do not edit. */
#include <stddef.h>

size_t ckpt_families__count(void);
const char *ckpt_families__name(size_t i);
const char *ckpt_families__json(size_t i, size_t *len);

${arrays}static const struct { const char *name, *json; size_t len; } families[] = {
${entries}};

size_t ckpt_families__count(void)
{
    return ${count};
}

const char *ckpt_families__name(size_t i)
{
    return i < ${count} ? families[i].name : NULL;
}

const char *ckpt_families__json(size_t i, size_t *len)
{
    if (i >= ${count})
        return NULL;
    *len = families[i].len;
    return families[i].json;
}
")
