// redis-streams-exporter monitoring mixin, in the thin form: the alert and recording rules are those
// of alerts/*.rules.yml and the dashboards the JSON files of dashboards/, imported as they are, so
// promtool tests the same rules this mixin hands out (tests/assets/mixin.rs renders it with jsonnet and
// compares). The rules come through rules/*.rules.json, JSON copies of the YAML files: the
// std.parseYaml of jsonnet 0.18 (Debian 12's) fails on every multi-line string, and the rules'
// expressions are multi-line. tests/assets/mixin.rs fails when a copy differs from its YAML file
// (RSE_UPDATE_GOLDEN=1 cargo test --test assets mixin:: rewrites them). docs/mixin.md shows how to use it.
//
// _config:
//   jobSelector, instanceSelector: label matchers (e.g. 'job="redis-streams"') that narrow the jobs
//     and instances the dashboards offer in their job and instance variables. Empty: every scrape
//     job that serves the exporter's build_info. The rules need none: they find the exporter's jobs
//     by its build_info and keep job and instance apart in every aggregation.
//   slo: include the delay-objective rules of alerts/redis-streams-slo.rules.yml (docs/slo.md).
local alertRules = import 'rules/redis-streams.rules.json';
local sloRules = import 'rules/redis-streams-slo.rules.json';

local isAlert(rule) = std.objectHas(rule, 'alert');

// The groups of `file` keeping only the rules `keep` accepts, without the groups left empty.
// The rules of each group that `keep` keeps; a group split between alerts and recording rules
// gets `suffix` on the part it hands out, so that the two parts never share a name.
local only(file, keep, suffix) = [
  group {
    name: group.name + (if std.length(std.filter(keep, group.rules)) < std.length(group.rules)
                        then suffix else ''),
    rules: std.filter(keep, group.rules),
  }
  for group in file.groups
  if std.length(std.filter(keep, group.rules)) > 0
];

local withSelector(matchers, extra) =
  std.join(',', std.filter(function(m) m != '', [matchers, extra]));

{
  _config+:: {
    jobSelector: '',
    instanceSelector: '',
    slo: true,
  },

  local files = [alertRules] + (if $._config.slo then [sloRules] else []),

  prometheusAlerts+:: {
    groups+: std.flattenArrays([only(f, isAlert, '') for f in files]),
  },

  prometheusRules+:: {
    groups+: std.flattenArrays([only(f, function(r) !isAlert(r), '-recording') for f in files]),
  },

  local variables(dashboard) = dashboard {
    templating+: {
      list: [
        if v.name == 'job' && $._config.jobSelector != '' then v {
          local q = 'label_values(redis_streams_exporter_build_info{%s}, job)' % $._config.jobSelector,
          query: q,
          definition: q,
        } else if v.name == 'instance' && $._config.instanceSelector != '' then v {
          local q = std.strReplace(v.query, '{', '{' + withSelector($._config.instanceSelector, '')
                                                      + ','),
          query: q,
          definition: q,
        } else v
        for v in dashboard.templating.list
      ],
    },
  },

  grafanaDashboards+:: {
    'redis-streams-overview.json': variables(import '../dashboards/redis-streams-overview.json'),
    'redis-streams-stream.json': variables(import '../dashboards/redis-streams-stream.json'),
    'redis-streams-exporter.json': variables(import '../dashboards/redis-streams-exporter.json'),
  },
}
