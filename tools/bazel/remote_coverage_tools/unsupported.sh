#!/bin/sh
echo "coverage is not supported in this offline build" >&2
exit 1
